// Webhooks: the list, a new one (its signing secret shown once), and each one's page with its
// recent deliveries, why it was disabled, a test event, edit, enable/disable and delete. Every
// action is the v2 operation the key may already call; deliveries and the test event are the
// dashboard's own reads and actions under the same rules.
import { useState } from 'preact/hooks';
import { extra, v2, type SessionInfo } from '../api.ts';
import { Badge, ErrorBox, go, messageOf, Page, Show, useLoad, When } from '../ui.tsx';
import { ConfirmDelete } from './confirm-delete.tsx';
import { RecentDeliveries, type DeliveriesAnswer } from './deliveries.tsx';
import { CheckField, domainList, Pager, TextField, type ListOf, type PageCursor } from './fields.tsx';
import { holdsAny } from './scopes.ts';
import { SecretOnce } from './secret-once.tsx';
import type { ScreenRoute } from './types.ts';
import './hooks.css';

/** The events a webhook can ask for: its flag, a name for people, the event type it sends. */
const EVENTS = [
  ['on_reception', 'Received', 'message.reception'],
  ['on_delivered', 'Delivered', 'message.delivered'],
  ['on_transient_error', 'Deferred', 'message.transient_error'],
  ['on_failed', 'Failed', 'message.failed'],
  ['on_bounced', 'Bounced', 'message.bounced'],
  ['on_suppressed', 'Suppressed', 'message.suppressed'],
  ['on_opened', 'Opened', 'message.opened'],
  ['on_clicked', 'Clicked', 'message.clicked'],
  ['on_suppression_created', 'Suppression created', 'suppression.created'],
  ['on_dns_error', 'DNS error', 'domain.dns_error'],
] as const;

type Flag = (typeof EVENTS)[number][0];
type Flags = Record<Flag, boolean>;

/** A webhook as the v2 API presents it. */
interface Webhook extends Flags {
  object: 'webhook';
  id: string;
  created_at: string;
  updated_at: string;
  name: string;
  url: string;
  enabled: boolean;
  scope: 'global' | 'scoped';
  domains: string[];
  success_count: number;
  error_count: number;
  errors_since_last_success: number;
  last_request_at: string | null;
}

/** The bounds the API holds a webhook to (its schema): checked here first, for a clear message. */
const MAX_NAME = 255;
const MAX_URL = 2048;
const MAX_DOMAINS = 100;

function collection(session: SessionInfo): string {
  return `/accounts/${encodeURIComponent(session.account_id ?? '')}/webhooks`;
}

function eventNames(w: Flags): string {
  const names = EVENTS.filter(([flag]) => w[flag]).map(([, name]) => name);
  return names.length === 0 ? 'none' : names.length === EVENTS.length ? 'all' : names.join(', ');
}

function WebhookList(props: { session: SessionInfo }) {
  const [cursor, setCursor] = useState<PageCursor>({});
  const loaded = useLoad(() => v2.get<ListOf<Webhook>>(collection(props.session), { limit: 50, ...cursor }), [cursor.after, cursor.before]);
  const mayWrite = holdsAny(props.session, 'webhooks:write');
  return (
    <Page
      title="Webhooks"
      actions={
        mayWrite ? (
          <button type="button" onClick={() => go('/webhooks/new')}>
            New webhook
          </button>
        ) : null
      }
    >
      <p class="muted">Webhooks send signed HTTP POSTs to your application when something happens to your mail.</p>
      <Show loaded={loaded}>
        {(list) =>
          list.data.length === 0 ? (
            <p>No webhooks yet.</p>
          ) : (
            <>
              <div class="table-wrap" tabIndex={0} role="region" aria-label="Webhook list">
                <table>
                  <caption>Webhooks</caption>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">URL</th>
                      <th scope="col">Events</th>
                      <th scope="col">Domains</th>
                      <th scope="col">Status</th>
                      <th scope="col">Last request</th>
                    </tr>
                  </thead>
                  <tbody>
                    {list.data.map((w) => (
                      <tr key={w.id}>
                        <td>
                          <a href={`#/webhooks/${w.id}`}>{w.name || '(no name)'}</a>
                        </td>
                        <td>
                          <code>{w.url}</code>
                        </td>
                        <td>{eventNames(w)}</td>
                        <td>{w.scope === 'global' ? 'all' : w.domains.join(', ')}</td>
                        <td>
                          <Badge value={w.enabled ? 'enabled' : 'disabled'} />
                          {w.errors_since_last_success > 0 ? <span class="muted"> {w.errors_since_last_success} failing</span> : null}
                        </td>
                        <td>
                          <When at={w.last_request_at} />
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

/** What the form sends: the create body, and for an update the same fields (each replaces the stored one). */
interface WebhookBody extends Flags {
  name: string;
  url: string;
  scope: 'global' | 'scoped';
  domains?: string[];
  enabled?: boolean;
}

function WebhookForm(props: { initial?: Webhook; submitLabel: string; onSubmit: (body: WebhookBody) => Promise<void>; onCancel: () => void }) {
  const init = props.initial;
  const [name, setName] = useState(init?.name ?? '');
  const [url, setUrl] = useState(init?.url ?? '');
  const [scope, setScope] = useState<'global' | 'scoped'>(init?.scope ?? 'global');
  const [domains, setDomains] = useState(init?.domains.join(', ') ?? '');
  const [flags, setFlags] = useState<Flags>(() => Object.fromEntries(EVENTS.map(([flag]) => [flag, init ? init[flag] : flag === 'on_delivered'])) as Flags);
  const [enabled, setEnabled] = useState(true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    const names = domainList(domains);
    if (!Object.values(flags).some(Boolean)) return setError('Choose at least one event to send.');
    if (scope === 'scoped' && names.length === 0) return setError('Name at least one domain, or send the events of every domain.');
    if (names.length > MAX_DOMAINS) return setError(`A webhook names at most ${MAX_DOMAINS} domains.`);
    setBusy(true);
    setError(null);
    try {
      await props.onSubmit({
        name: name.trim(),
        url: url.trim(),
        scope,
        ...(scope === 'scoped' ? { domains: names } : {}),
        ...flags,
        ...(init ? {} : { enabled }),
      });
    } catch (err) {
      setError(messageOf(err));
      setBusy(false);
    }
  };

  return (
    <form class="stack" onSubmit={(e) => void submit(e)}>
      <TextField label="Name" value={name} onInput={setName} required maxLength={MAX_NAME} />
      <TextField
        label="URL"
        type="url"
        value={url}
        onInput={setUrl}
        required
        maxLength={MAX_URL}
        placeholder="https://example.com/webhooks/mail"
        hint="Where the events are POSTed: https (or http), not a private address unless the operator allows it."
      />
      <fieldset class="choices">
        <legend>Events</legend>
        <div class="field-checks">
          {EVENTS.map(([flag, label, type]) => (
            <CheckField key={flag} label={label} hint={type} checked={flags[flag]} onChange={(on) => setFlags({ ...flags, [flag]: on })} />
          ))}
        </div>
      </fieldset>
      <fieldset class="choices">
        <legend>Domains</legend>
        <div class="field-check">
          <input type="radio" id="webhook-scope-global" name="scope" checked={scope === 'global'} onChange={() => setScope('global')} />
          <label for="webhook-scope-global">Every domain of the account</label>
        </div>
        <div class="field-check">
          <input type="radio" id="webhook-scope-scoped" name="scope" checked={scope === 'scoped'} onChange={() => setScope('scoped')} />
          <label for="webhook-scope-scoped">Only these domains</label>
        </div>
        {scope === 'scoped' ? (
          <TextField label="Domain names" multiline value={domains} onInput={setDomains} maxLength={26_000} hint="Separated by commas or new lines." />
        ) : null}
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

function NewWebhook(props: { session: SessionInfo }) {
  const [created, setCreated] = useState<(Webhook & { secret: string }) | null>(null);
  return (
    <Page title="New webhook">
      {created ? (
        <SecretOnce title="Signing secret" value={created.secret}>
          <p>
            The webhook <strong>{created.name}</strong> is created. Use this secret to check the signature of each request (Standard Webhooks).
          </p>
          <p class="actions">
            <a href={`#/webhooks/${created.id}`}>Open the webhook</a>
            <a href="#/webhooks">Back to webhooks</a>
          </p>
        </SecretOnce>
      ) : (
        <WebhookForm
          submitLabel="Create webhook"
          onSubmit={async (body) => setCreated(await v2.post<Webhook & { secret: string }>(collection(props.session), body))}
          onCancel={() => go('/webhooks')}
        />
      )}
    </Page>
  );
}

function WebhookPage(props: { id: string; session: SessionInfo }) {
  const path = `${collection(props.session)}/${encodeURIComponent(props.id)}`;
  const loaded = useLoad(() => v2.get<Webhook>(path), [path]);
  const deliveries = useLoad(() => extra.get<DeliveriesAnswer>(`${path}/deliveries`), [path]);
  const [editing, setEditing] = useState(false);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const mayWrite = holdsAny(props.session, 'webhooks:write');
  const mayDelete = holdsAny(props.session, 'webhooks:delete');
  const w = loaded.data;

  const act = async (what: () => Promise<string>) => {
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      setNotice(await what());
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  const toggle = (webhook: Webhook) =>
    act(async () => {
      await v2.put<Webhook>(path, { enabled: !webhook.enabled });
      loaded.reload();
      deliveries.reload();
      return webhook.enabled ? 'The webhook is disabled: no events are sent to it.' : 'The webhook is enabled again.';
    });
  const sendTest = () =>
    act(async () => {
      const answer = await extra.post<{ delivery_id?: string; message?: string }>(`${path}/test`);
      // The delivery is queued: look again once it has had a moment to go.
      setTimeout(deliveries.reload, 2000);
      return answer?.message ?? `A test event is on its way${answer?.delivery_id ? ` (delivery ${answer.delivery_id})` : ''}.`;
    });

  return (
    <Page
      title={w ? w.name || '(no name)' : 'Webhook'}
      actions={
        w && !editing ? (
          <>
            {mayWrite ? (
              <>
                <button type="button" class="secondary" onClick={() => setEditing(true)}>
                  Edit
                </button>
                <button type="button" class="secondary" disabled={busy} onClick={() => void toggle(w)}>
                  {w.enabled ? 'Disable' : 'Enable'}
                </button>
                <button type="button" disabled={busy} onClick={() => void sendTest()}>
                  Send test event
                </button>
              </>
            ) : null}
            {mayDelete ? (
              <ConfirmDelete
                thing="webhook"
                onDelete={async () => {
                  await v2.delete(path);
                  go('/webhooks');
                }}
              />
            ) : null}
          </>
        ) : null
      }
    >
      <p>
        <a href="#/webhooks">All webhooks</a>
      </p>
      <div role="status">{notice ? <p class="notice">{notice}</p> : null}</div>
      <ErrorBox error={error} />
      <Show loaded={loaded}>
        {(webhook) =>
          editing ? (
            <section aria-labelledby="edit-webhook">
              <h2 id="edit-webhook">Edit webhook</h2>
              <WebhookForm
                initial={webhook}
                submitLabel="Save changes"
                onSubmit={async (body) => {
                  await v2.put<Webhook>(path, body);
                  setEditing(false);
                  setNotice('Changes saved.');
                  loaded.reload();
                }}
                onCancel={() => setEditing(false)}
              />
            </section>
          ) : (
            <>
              {!webhook.enabled ? <DisabledNote webhook={webhook} reason={deliveries.data?.disabled_reason ?? null} /> : null}
              <dl class="fields">
                <dt>Status</dt>
                <dd>
                  <Badge value={webhook.enabled ? 'enabled' : 'disabled'} />
                </dd>
                <dt>URL</dt>
                <dd>
                  <code>{webhook.url}</code>
                </dd>
                <dt>Events</dt>
                <dd>{eventNames(webhook)}</dd>
                <dt>Domains</dt>
                <dd>{webhook.scope === 'global' ? 'every domain of the account' : webhook.domains.join(', ') || '(none left)'}</dd>
                <dt>Delivered</dt>
                <dd>{webhook.success_count}</dd>
                <dt>Failed</dt>
                <dd>{webhook.error_count}</dd>
                <dt>Failures since the last success</dt>
                <dd>{webhook.errors_since_last_success}</dd>
                <dt>Last request</dt>
                <dd>
                  <When at={webhook.last_request_at} />
                </dd>
                <dt>Created</dt>
                <dd>
                  <When at={webhook.created_at} />
                </dd>
                <dt>Webhook ID</dt>
                <dd>
                  <code>{webhook.id}</code>
                </dd>
              </dl>
            </>
          )
        }
      </Show>
      {w && !editing ? <RecentDeliveries loaded={deliveries} /> : null}
    </Page>
  );
}

/** Why no events go out: the server's reason when it disabled the webhook itself (null when a person did, or unknown). */
function DisabledNote(props: { webhook: Webhook; reason: string | null }) {
  const failures = props.webhook.errors_since_last_success;
  return (
    <p class="notice">
      <strong>Disabled.</strong> {props.reason ? `Why: ${props.reason}. ` : failures > 0 ? `Its last ${failures} deliveries failed. ` : ''}
      No events are sent to it until it is enabled again.
    </p>
  );
}

export const routes: ScreenRoute[] = [
  { path: '/webhooks', for: 'account', nav: { label: 'Webhooks', order: 30 }, render: (_p, session) => <WebhookList session={session} /> },
  { path: '/webhooks/new', for: 'account', render: (_p, session) => <NewWebhook session={session} /> },
  { path: '/webhooks/:webhook_id', for: 'account', render: (p, session) => <WebhookPage id={p.webhook_id!} session={session} /> },
];
