// The message log: getMessages with its filters, a page at a time. The search lives in the
// hash (`#/messages?recipient=…`), so back, reload and a shared link show the same list.
import { useState } from 'preact/hooks';
import { v2, type SessionInfo } from '../api.ts';
import { TableWrap, Badge, go, hashQuery, href, Page, Show, useLoad, When } from '../ui.tsx';
import { MessagePage } from './message-page.tsx';
import type { MessageSummary } from './message-summary.ts';
import type { ScreenRoute } from './types.ts';

/** The statuses getMessages filters on (its `status` parameter). */
export const STATUSES = [
  'Received',
  'Delivered',
  'Deferred',
  'Bounced',
  'Failed',
  'Suppressed',
  'Cancelled',
  'Sandbox Delivered',
  'Sandbox Deferred',
  'Sandbox Failed',
  'Sandbox Bounced',
  'Sandbox Suppressed',
];

interface MessageList {
  data: MessageSummary[];
  pagination: { has_more: boolean; next_cursor?: string; previous_cursor?: string };
}

/** The search form's fields, as they stand in the hash query. */
const FIELDS = ['recipient', 'sender', 'subject', 'status', 'tag', 'from', 'to'] as const;
type Search = Record<(typeof FIELDS)[number], string>;

const PAGE_SIZE = 50;
const EMPTY: Search = { recipient: '', sender: '', subject: '', status: '', tag: '', from: '', to: '' };

function searchOf(query: URLSearchParams): Search {
  const search = {} as Search;
  for (const field of FIELDS) search[field] = (query.get(field) ?? '').slice(0, 998);
  return search;
}

/** A `datetime-local` value (the person's time) as RFC 3339; undefined when empty or unreadable. */
function rfc3339(local: string): string | undefined {
  if (!local) return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** The id getMessage takes from what a person pastes: `<uuid@domain>`, `uuid@domain` or a bare id. */
export function messageRef(text: string): string {
  const value = text.trim().replace(/^<|>$/g, '');
  const uuid = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})@/i.exec(value);
  return uuid ? uuid[1]! : value;
}

function MessagesPage(props: { session: SessionInfo }) {
  const query = hashQuery();
  const search = searchOf(query);
  const after = query.get('after') ?? undefined;
  const before = query.get('before') ?? undefined;
  const account = props.session.account_id!;
  const key = query.toString();
  const list = useLoad(
    () =>
      v2.get<MessageList>(`/accounts/${account}/messages`, {
        recipient: search.recipient.trim(),
        sender: search.sender.trim(),
        subject: search.subject.trim(),
        status: search.status,
        tags: search.tag.trim(),
        from_time: rfc3339(search.from),
        to_time: rfc3339(search.to),
        limit: PAGE_SIZE,
        after,
        before,
      }),
    [account, key],
  );
  return (
    <Page title="Messages">
      <SearchForm key={key} search={search} />
      <Show loaded={list}>
        {(page) => (
          <>
            <TableWrap label="Messages (scrolls sideways)">
              <table>
                <caption>Messages</caption>
                <thead>
                  <tr>
                    <th scope="col">Subject</th>
                    <th scope="col">Status</th>
                    <th scope="col">Recipient</th>
                    <th scope="col">Sender</th>
                    <th scope="col">Created</th>
                    <th scope="col">Tags</th>
                  </tr>
                </thead>
                <tbody>
                  {page.data.length === 0 ? (
                    <tr>
                      <td colSpan={6} class="muted">
                        No messages match this search.
                      </td>
                    </tr>
                  ) : (
                    page.data.map((m) => (
                      <tr key={m.id ?? m.message_id}>
                        <td>
                          <a href={`#/messages/${encodeURIComponent(m.id ?? messageRef(m.message_id))}`}>{m.subject || '(no subject)'}</a>
                        </td>
                        <td class="nowrap">
                          <Badge value={m.status} />
                        </td>
                        <td>{m.recipient}</td>
                        <td>{m.sender}</td>
                        <td class="nowrap">
                          <When at={m.created_at} />
                        </td>
                        <td>{m.tags.join(', ')}</td>
                      </tr>
                    ))
                  )}
                </tbody>
              </table>
            </TableWrap>
            <Pager search={search} page={page} />
          </>
        )}
      </Show>
    </Page>
  );
}

/** The list's neighbours by its cursors: `before` the previous page, `after` the next. */
function Pager(props: { search: Search; page: MessageList }) {
  const { previous_cursor: previous, next_cursor: next } = props.page.pagination;
  if (!previous && !next) return null;
  return (
    <nav class="pager" aria-label="Pages">
      {previous ? <a href={href('/messages', { ...props.search, before: previous })}>Previous page</a> : null}
      {next ? <a href={href('/messages', { ...props.search, after: next })}>Next page</a> : null}
    </nav>
  );
}

function SearchForm(props: { search: Search }) {
  const [form, setForm] = useState<Search & { messageId: string }>({ ...props.search, messageId: '' });
  const set = (field: keyof typeof form) => (e: Event) => setForm({ ...form, [field]: (e.target as HTMLInputElement).value });
  const submit = (e: Event) => {
    e.preventDefault();
    // A message id names one message: open it rather than list.
    const ref = messageRef(form.messageId);
    if (ref) return go(`/messages/${encodeURIComponent(ref)}`);
    const { messageId: _, ...search } = form;
    go('/messages', search);
  };
  const field = (id: keyof typeof form, label: string, attrs: Record<string, unknown> = {}) => (
    <div>
      <label for={`search-${id}`}>{label}</label>
      <input id={`search-${id}`} name={id} value={form[id]} onInput={set(id)} maxLength={254} {...attrs} />
    </div>
  );
  return (
    <form class="filters" role="search" aria-label="Search messages" onSubmit={submit}>
      {field('recipient', 'Recipient', { type: 'email', autocomplete: 'off', placeholder: 'name@example.com' })}
      {field('sender', 'Sender', { type: 'email', autocomplete: 'off' })}
      {field('subject', 'Subject', { type: 'search', maxLength: 998 })}
      <div>
        <label for="search-status">Status</label>
        <select id="search-status" name="status" value={form.status} onChange={set('status')}>
          <option value="">Any</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </div>
      {field('tag', 'Tag', { type: 'search', maxLength: 255 })}
      {field('from', 'From', { type: 'datetime-local' })}
      {field('to', 'To', { type: 'datetime-local' })}
      {field('messageId', 'Message ID', { type: 'search', maxLength: 998, placeholder: '<id@domain> or id', spellcheck: false })}
      <div class="buttons">
        <button type="submit">Search</button>
        <button
          type="button"
          class="secondary"
          onClick={() => {
            setForm({ ...EMPTY, messageId: '' });
            go('/messages');
          }}
        >
          Clear
        </button>
      </div>
    </form>
  );
}

export const routes: ScreenRoute[] = [
  { path: '/messages', for: 'account', nav: { label: 'Messages', order: 10 }, render: (_, session) => <MessagesPage session={session} /> },
  { path: '/messages/:id', for: 'account', render: (params, session) => <MessagePage key={params.id} id={params.id!} session={session} /> },
];
