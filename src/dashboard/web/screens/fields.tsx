// Form fields with their labels and hints tied to them (for screen readers and getByLabel), and
// the list pager. Used by the webhook and route forms.
import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';
import './hooks.css';

export function TextField(props: {
  label: string;
  value: string;
  onInput: (value: string) => void;
  type?: 'text' | 'url';
  required?: boolean;
  maxLength: number;
  placeholder?: string;
  hint?: ComponentChildren;
  multiline?: boolean;
}) {
  const id = useId();
  const hint = props.hint ? `${id}-hint` : undefined;
  const common = {
    id,
    class: 'field-text',
    value: props.value,
    required: props.required,
    maxLength: props.maxLength,
    placeholder: props.placeholder,
    spellcheck: false,
    'aria-describedby': hint,
    onInput: (e: Event) => props.onInput((e.currentTarget as HTMLInputElement | HTMLTextAreaElement).value),
  };
  return (
    <div>
      <label for={id}>{props.label}</label>
      {props.multiline ? <textarea rows={3} {...common} /> : <input type={props.type ?? 'text'} autocomplete="off" {...common} />}
      {props.hint ? (
        <p id={hint} class="field-hint muted">
          {props.hint}
        </p>
      ) : null}
    </div>
  );
}

export function CheckField(props: { label: string; checked: boolean; onChange: (checked: boolean) => void; hint?: string }) {
  const id = useId();
  return (
    <div class="field-check">
      <input
        type="checkbox"
        id={id}
        checked={props.checked}
        aria-describedby={props.hint ? `${id}-hint` : undefined}
        onChange={(e) => props.onChange(e.currentTarget.checked)}
      />
      <label for={id}>{props.label}</label>
      {props.hint ? (
        <span id={`${id}-hint`} class="muted">
          {props.hint}
        </span>
      ) : null}
    </div>
  );
}

/** A list envelope's pagination, as the v2 list operations give it. */
export interface Pagination {
  has_more: boolean;
  next_cursor?: string;
  previous_cursor?: string;
}

export interface ListOf<T> {
  object: 'list';
  data: T[];
  pagination?: Pagination;
}

export type PageCursor = { after?: string; before?: string };

export function Pager(props: { pagination: Pagination | undefined; onPage: (cursor: PageCursor) => void }) {
  const p = props.pagination;
  if (!p || (!p.next_cursor && !p.previous_cursor)) return null;
  return (
    <nav class="actions pager" aria-label="Pages">
      {p.previous_cursor ? (
        <button type="button" class="secondary" onClick={() => props.onPage({ before: p.previous_cursor })}>
          Previous page
        </button>
      ) : null}
      {p.next_cursor ? (
        <button type="button" class="secondary" onClick={() => props.onPage({ after: p.next_cursor })}>
          Next page
        </button>
      ) : null}
    </nav>
  );
}

/** "a.com, b.com\nc.com" → the names, trimmed, lower-cased, each once. */
export function domainList(text: string): string[] {
  return [
    ...new Set(
      text
        .split(/[\s,]+/)
        .map((s) => s.trim().toLowerCase())
        .filter((s) => s.length > 0),
    ),
  ];
}
