// The API's lists come a page at a time (limit, after, before): the cursor to load and the
// buttons that move it.
import { useState } from 'preact/hooks';

export interface Pagination {
  has_more: boolean;
  next_cursor?: string;
  previous_cursor?: string;
}

export interface ListPage<T> {
  object: 'list';
  data: T[];
  pagination?: Pagination;
}

export type Cursor = { after?: string; before?: string };

/** The cursor of the page shown; `reset` goes back to the first page (after a new filter). */
export function useCursor(): { cursor: Cursor; setCursor: (c: Cursor) => void; reset: () => void } {
  const [cursor, setCursor] = useState<Cursor>({});
  return { cursor, setCursor, reset: () => setCursor({}) };
}

export function Pager(props: { pagination: Pagination | undefined; cursor: Cursor; onPage: (c: Cursor) => void }) {
  const p = props.pagination;
  if (!p) return null;
  const previous = p.previous_cursor !== undefined && (props.cursor.after !== undefined || props.cursor.before !== undefined);
  const next = p.next_cursor !== undefined;
  if (!previous && !next) return null;
  return (
    <nav class="actions pager" aria-label="Pages">
      <button type="button" class="secondary small" disabled={!previous} onClick={() => props.onPage({ before: p.previous_cursor })}>
        Previous page
      </button>
      <button type="button" class="secondary small" disabled={!next} onClick={() => props.onPage({ after: p.next_cursor })}>
        Next page
      </button>
    </nav>
  );
}
