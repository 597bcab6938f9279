// Inbound routes: mail to a recipient pattern of the account's domains is POSTed, parsed, to a
// URL. The list, a new route (its signing secret shown once), and each route's page with its
// recent deliveries, edit, enable/disable and delete, all through the v2 operations.
import { useId, useState } from 'preact/hooks';
import { extra, v2, type SessionInfo } from '../api.ts';
import { Badge, ErrorBox, go, messageOf, Page, Show, useLoad, When } from '../ui.tsx';
import { ConfirmDelete } from './confirm-delete.tsx';
import { RecentDeliveries, type DeliveriesAnswer } from './deliveries.tsx';
import { CheckField, Pager, TextField, type ListOf, type PageCursor } from './fields.tsx';
import { domainsFor, holdsAll, holdsAny } from './scopes.ts';
import { SecretOnce } from './secret-once.tsx';
import type { ScreenRoute } from './types.ts';
import './hooks.css';

/** A route's options: its field, a name for people, what it does. */
const OPTIONS = [
  ['attachments', 'Attachments', 'include the attachments (base64) in the POST'],
  ['headers', 'Headers', 'include every header of the message'],
  ['group_by_message_id', 'Group by message ID', 'one POST per message, not one per recipient'],
  ['strip_replies', 'Strip replies', 'leave out the quoted earlier messages'],
] as const;

type Option = (typeof OPTIONS)[number][0];
type Options = Record<Option, boolean>;

/** A route as the v2 API presents it. */
interface Route extends Options {
  object: 'route';
  id: string;
  created_at: string;
  updated_at: string;
  last_request_at: string | null;
  name: string;
  url: string;
  recipient: string;
  enabled: boolean;
  success_count: number;
  error_count: number;
  errors_since_last_success: number;
}

/** The bounds the API holds a route to (its schema). */
const MAX_NAME = 255;
const MAX_URL = 2048;
const MAX_RECIPIENT = 255;

function collection(session: SessionInfo): string {
  return `/accounts/${encodeURIComponent(session.account_id ?? '')}/routes`;
}

function optionNames(r: Options): string {
  const names = OPTIONS.filter(([field]) => r[field]).map(([, name]) => name.toLowerCase());
  return names.length === 0 ? 'none' : names.join(', ');
}

function RouteList(props: { session: SessionInfo }) {
  // A key that reads routes of some domains only must name one to list (the API's rule).
  const scoped = holdsAll(props.session, 'routes:read') ? null : domainsFor(props.session, 'routes:read');
  const [domain, setDomain] = useState(scoped?.[0] ?? '');
  const [cursor, setCursor] = useState<PageCursor>({});
  const loaded = useLoad(
    () =>
      scoped && scoped.length === 0
        ? Promise.reject(new Error('This API key may not read routes.'))
        : v2.get<ListOf<Route>>(collection(props.session), { limit: 50, domain, ...cursor }),
    [domain, cursor.after, cursor.before],
  );
  const mayWrite = holdsAny(props.session, 'routes:write');
  const domainId = useId();
  return (
    <Page
      title="Routes"
      actions={
        mayWrite ? (
          <button type="button" onClick={() => go('/routes/new')}>
            New route
          </button>
        ) : null
      }
    >
      <p class="muted">Routes take mail sent to your domains and POST it, parsed into JSON, to your application.</p>
      {scoped && scoped.length > 1 ? (
        <form class="filters" onSubmit={(e) => e.preventDefault()}>
          <div>
            <label for={domainId}>Domain</label>
            <select
              id={domainId}
              value={domain}
              onChange={(e) => {
                setDomain(e.currentTarget.value);
                setCursor({});
              }}
            >
              {scoped.map((d) => (
                <option key={d} value={d}>
                  {d}
                </option>
              ))}
            </select>
          </div>
        </form>
      ) : null}
      <Show loaded={loaded}>
        {(list) =>
          list.data.length === 0 ? (
            <p>No routes yet.</p>
          ) : (
            <>
              <div class="table-wrap" tabIndex={0} role="region" aria-label="Route list">
                <table>
                  <caption>Routes</caption>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Recipient</th>
                      <th scope="col">URL</th>
                      <th scope="col">Status</th>
                      <th scope="col">Last request</th>
                    </tr>
                  </thead>
                  <tbody>
                    {list.data.map((r) => (
                      <tr key={r.id}>
                        <td>
                          <a href={`#/routes/${r.id}`}>{r.name || '(no name)'}</a>
                        </td>
                        <td>
                          <code>{r.recipient}</code>
                        </td>
                        <td>
                          <code>{r.url}</code>
                        </td>
                        <td>
                          <Badge value={r.enabled ? 'enabled' : 'disabled'} />
                          {r.errors_since_last_success > 0 ? <span class="muted"> {r.errors_since_last_success} failing</span> : null}
                        </td>
                        <td>
                          <When at={r.last_request_at} />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              <Pager pagination={list.pagination} onPage={setCursor} />
            </>
          )
        }
      </Show>
    </Page>
  );
}

interface RouteBody extends Options {
  name: string;
  url: string;
  recipient: string;
  enabled?: boolean;
}

function RouteForm(props: { initial?: Route; submitLabel: string; onSubmit: (body: RouteBody) => Promise<void>; onCancel: () => void }) {
  const init = props.initial;
  const [name, setName] = useState(init?.name ?? '');
  const [url, setUrl] = useState(init?.url ?? '');
  const [recipient, setRecipient] = useState(init?.recipient ?? '');
  const [options, setOptions] = useState<Options>(() => Object.fromEntries(OPTIONS.map(([field]) => [field, init ? init[field] : false])) as Options);
  const [enabled, setEnabled] = useState(true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await props.onSubmit({ name: name.trim(), url: url.trim(), recipient: recipient.trim(), ...options, ...(init ? {} : { enabled }) });
    } catch (err) {
      setError(messageOf(err));
      setBusy(false);
    }
  };

  return (
    <form class="stack" onSubmit={(e) => void submit(e)}>
      <TextField label="Name" value={name} onInput={setName} required maxLength={MAX_NAME} />
      <TextField
        label="Recipient"
        value={recipient}
        onInput={setRecipient}
        required
        maxLength={MAX_RECIPIENT}
        placeholder="support@example.com"
        hint="An address or a pattern at one of your domains: support@example.com, *@example.com, ticket-*@example.com."
      />
      <TextField
        label="URL"
        type="url"
        value={url}
        onInput={setUrl}
        required
        maxLength={MAX_URL}
        placeholder="https://example.com/inbound"
        hint="Where the mail is POSTed as JSON: https (or http), not a private address unless the operator allows it."
      />
      <fieldset class="choices">
        <legend>Options</legend>
        {OPTIONS.map(([field, label, hint]) => (
          <CheckField key={field} label={label} hint={hint} checked={options[field]} onChange={(on) => setOptions({ ...options, [field]: on })} />
        ))}
      </fieldset>
      {init ? null : <CheckField label="Enabled" checked={enabled} onChange={setEnabled} />}
      <ErrorBox error={error} />
      <div class="actions">
        <button type="submit" disabled={busy}>
          {props.submitLabel}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function NewRoute(props: { session: SessionInfo }) {
  const [created, setCreated] = useState<(Route & { secret: string }) | null>(null);
  return (
    <Page title="New route">
      {created ? (
        <SecretOnce title="Signing secret" value={created.secret}>
          <p>
            The route <strong>{created.name}</strong> is created: mail to <code>{created.recipient}</code> goes to your URL, signed with this secret.
          </p>
          <p class="actions">
            <a href={`#/routes/${created.id}`}>Open the route</a>
            <a href="#/routes">Back to routes</a>
          </p>
        </SecretOnce>
      ) : (
        <RouteForm
          submitLabel="Create route"
          onSubmit={async (body) => setCreated(await v2.post<Route & { secret: string }>(collection(props.session), body))}
          onCancel={() => go('/routes')}
        />
      )}
    </Page>
  );
}

function RoutePage(props: { id: string; session: SessionInfo }) {
  const path = `${collection(props.session)}/${encodeURIComponent(props.id)}`;
  const loaded = useLoad(() => v2.get<Route>(path), [path]);
  const deliveries = useLoad(() => extra.get<DeliveriesAnswer>(`${path}/deliveries`), [path]);
  const [editing, setEditing] = useState(false);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const mayWrite = holdsAny(props.session, 'routes:write');
  const mayDelete = holdsAny(props.session, 'routes:delete');
  const r = loaded.data;

  const toggle = async (route: Route) => {
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      await v2.put<Route>(path, { enabled: !route.enabled });
      setNotice(route.enabled ? 'The route is disabled: new mail to its recipient is refused.' : 'The route is enabled again.');
      loaded.reload();
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Page
      title={r ? r.name || '(no name)' : 'Route'}
      actions={
        r && !editing ? (
          <>
            {mayWrite ? (
              <>
                <button type="button" class="secondary" onClick={() => setEditing(true)}>
                  Edit
                </button>
                <button type="button" class="secondary" disabled={busy} onClick={() => void toggle(r)}>
                  {r.enabled ? 'Disable' : 'Enable'}
                </button>
              </>
            ) : null}
            {mayDelete ? (
              <ConfirmDelete
                thing="route"
                onDelete={async () => {
                  await v2.delete(path);
                  go('/routes');
                }}
              />
            ) : null}
          </>
        ) : null
      }
    >
      <p>
        <a href="#/routes">All routes</a>
      </p>
      <div role="status">{notice ? <p class="notice">{notice}</p> : null}</div>
      <ErrorBox error={error} />
      <Show loaded={loaded}>
        {(route) =>
          editing ? (
            <section aria-labelledby="edit-route">
              <h2 id="edit-route">Edit route</h2>
              <RouteForm
                initial={route}
                submitLabel="Save changes"
                onSubmit={async (body) => {
                  await v2.put<Route>(path, body);
                  setEditing(false);
                  setNotice('Changes saved.');
                  loaded.reload();
                }}
                onCancel={() => setEditing(false)}
              />
            </section>
          ) : (
            <>
              {!route.enabled ? (
                <p class="notice">
                  <strong>Disabled.</strong>{' '}
                  {deliveries.data?.disabled_reason
                    ? `Why: ${deliveries.data.disabled_reason}. `
                    : route.errors_since_last_success > 0
                      ? `Its last ${route.errors_since_last_success} deliveries failed. `
                      : ''}
                  New mail to its recipient is refused until it is enabled again.
                </p>
              ) : null}
              <dl class="fields">
                <dt>Status</dt>
                <dd>
                  <Badge value={route.enabled ? 'enabled' : 'disabled'} />
                </dd>
                <dt>Recipient</dt>
                <dd>
                  <code>{route.recipient}</code>
                </dd>
                <dt>URL</dt>
                <dd>
                  <code>{route.url}</code>
                </dd>
                <dt>Options</dt>
                <dd>{optionNames(route)}</dd>
                <dt>Delivered</dt>
                <dd>{route.success_count}</dd>
                <dt>Failed</dt>
                <dd>{route.error_count}</dd>
                <dt>Failures since the last success</dt>
                <dd>{route.errors_since_last_success}</dd>
                <dt>Last request</dt>
                <dd>
                  <When at={route.last_request_at} />
                </dd>
                <dt>Created</dt>
                <dd>
                  <When at={route.created_at} />
                </dd>
                <dt>Route ID</dt>
                <dd>
                  <code>{route.id}</code>
                </dd>
              </dl>
            </>
          )
        }
      </Show>
      {r && !editing ? <RecentDeliveries loaded={deliveries} /> : null}
    </Page>
  );
}

export const routes: ScreenRoute[] = [
  { path: '/routes', for: 'account', nav: { label: 'Routes', order: 40 }, render: (_p, session) => <RouteList session={session} /> },
  { path: '/routes/new', for: 'account', render: (_p, session) => <NewRoute session={session} /> },
  { path: '/routes/:route_id', for: 'account', render: (p, session) => <RoutePage id={p.route_id!} session={session} /> },
];
