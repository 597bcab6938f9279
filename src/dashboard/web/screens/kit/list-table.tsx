// Lists as tables: a caption, the column headings, a row per item and a sentence when there is
// none; for a list the API gives a page at a time, the pager under it.
import type { ComponentChildren } from 'preact';
import { TableWrap } from '../../ui.tsx';
import { Pager, type Cursor, type ListPage } from './paging.tsx';

export function Table<T>(props: {
  caption: string;
  columns: string[];
  items: T[];
  /** One `<tr>` (with its key) per item. */
  row: (item: T, index: number) => ComponentChildren;
  empty: string;
}) {
  if (props.items.length === 0) return <p class="muted">{props.empty}</p>;
  return (
    <TableWrap label={`${props.caption} table`}>
      <table>
        <caption>{props.caption}</caption>
        <thead>
          <tr>
            {props.columns.map((c) => (
              <th key={c} scope="col">
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{props.items.map(props.row)}</tbody>
      </table>
    </TableWrap>
  );
}

export function ListTable<T>(props: {
  caption: string;
  columns: string[];
  page: ListPage<T>;
  row: (item: T) => ComponentChildren;
  empty: string;
  /** Without them the list is one page. */
  cursor?: Cursor;
  onPage?: (c: Cursor) => void;
}) {
  const { page, cursor, onPage, ...table } = props;
  return (
    <>
      <Table {...table} items={page.data} />
      {page.data.length > 0 && cursor && onPage ? <Pager pagination={page.pagination} cursor={cursor} onPage={onPage} /> : null}
    </>
  );
}

/** A row's button that acts on it; the row's header cell (`of`, its id) says which row it is. */
export function RowButton(props: { of: string; look?: 'danger' | 'primary'; disabled?: boolean; onClick: () => void; children: ComponentChildren }) {
  const look = props.look === 'danger' ? 'danger small' : props.look === 'primary' ? 'small' : 'secondary small';
  return (
    <button type="button" class={look} disabled={props.disabled} aria-describedby={props.of} onClick={props.onClick}>
      {props.children}
    </button>
  );
}
