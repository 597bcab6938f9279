// Webhooks: the list, a new one (its signing secret shown once), and each one's page with its
// recent deliveries, why it was disabled, a test event, edit, enable/disable and delete. Every
// action is the v2 operation the key may already call; deliveries and the test event are the
// dashboard's own reads and actions under the same rules.
import { useState } from 'preact/hooks';
import { extra, type SessionInfo } from '../api.ts';
import { When } from '../ui.tsx';
import { endpointRoutes, EndpointList, StatusCell, type Endpoint, type Kind } from './endpoints.tsx';
import { CheckField, RadioField, TextField } from './kit/fields.tsx';
import { FormCard } from './kit/form.tsx';
import { domainList } from './kit/text.ts';
import type { ScreenRoute } from './types.ts';

const KIND: Kind = {
  one: 'webhook',
  One: 'Webhook',
  many: 'Webhooks',
  resource: 'webhooks',
  whileDisabled: 'No events are sent to it until it is enabled again.',
};

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
type Scope = 'global' | 'scoped';

/** A webhook as the v2 API presents it. */
interface Webhook extends Endpoint, Flags {
  object: 'webhook';
  updated_at: string;
  scope: Scope;
  domains: string[];
}

/** The bounds the API holds a webhook to (its schema): checked here first, for a clear message. */
const MAX_NAME = 255;
const MAX_URL = 2048;
const MAX_DOMAINS = 100;

const SCOPES = [
  ['global', 'Every domain of the account'],
  ['scoped', 'Only these domains'],
] as const;

function eventNames(w: Flags): string {
  const names = EVENTS.filter(([flag]) => w[flag]).map(([, name]) => name);
  return names.length === 0 ? 'none' : names.length === EVENTS.length ? 'all' : names.join(', ');
}

function WebhookList(props: { session: SessionInfo }) {
  return (
    <EndpointList<Webhook>
      kind={KIND}
      session={props.session}
      intro="Webhooks send signed HTTP POSTs to your application when something happens to your mail."
      columns={['URL', 'Events', 'Domains', 'Status', 'Last request']}
      cells={(w) => (
        <>
          <td>
            <code>{w.url}</code>
          </td>
          <td>{eventNames(w)}</td>
          <td>{w.scope === 'global' ? 'all' : w.domains.join(', ')}</td>
          <StatusCell endpoint={w} />
          <td>
            <When at={w.last_request_at} />
          </td>
        </>
      )}
    />
  );
}

/** What the form sends: the create body, and for an update the same fields (each replaces the stored one). */
interface WebhookBody extends Flags {
  name: string;
  url: string;
  scope: Scope;
  domains?: string[];
  enabled?: boolean;
}

function WebhookForm(props: { initial?: Webhook; title?: string; submitLabel: string; onSubmit: (body: WebhookBody) => Promise<void>; onCancel: () => void }) {
  const init = props.initial;
  const [name, setName] = useState(init?.name ?? '');
  const [url, setUrl] = useState(init?.url ?? '');
  const [scope, setScope] = useState<Scope>(init?.scope ?? 'global');
  const [domains, setDomains] = useState(init?.domains.join(', ') ?? '');
  const [flags, setFlags] = useState<Flags>(() => Object.fromEntries(EVENTS.map(([flag]) => [flag, init ? init[flag] : flag === 'on_delivered'])) as Flags);
  const [enabled, setEnabled] = useState(true);

  const submit = async () => {
    const names = domainList(domains);
    if (!Object.values(flags).some(Boolean)) return 'Choose at least one event to send.';
    if (scope === 'scoped' && names.length === 0) return 'Name at least one domain, or send the events of every domain.';
    if (names.length > MAX_DOMAINS) return `A webhook names at most ${MAX_DOMAINS} domains.`;
    await props.onSubmit({
      name: name.trim(),
      url: url.trim(),
      scope,
      ...(scope === 'scoped' ? { domains: names } : {}),
      ...flags,
      ...(init ? {} : { enabled }),
    });
  };

  return (
    <FormCard title={props.title} submitLabel={props.submitLabel} onSubmit={submit} onCancel={props.onCancel}>
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
      <fieldset>
        <legend>Events</legend>
        <div class="field-checks">
          {EVENTS.map(([flag, label, type]) => (
            <CheckField key={flag} label={label} hint={type} checked={flags[flag]} onChange={(on) => setFlags({ ...flags, [flag]: on })} />
          ))}
        </div>
      </fieldset>
      <RadioField legend="Domains" value={scope} options={SCOPES} onChange={setScope} />
      {scope === 'scoped' ? (
        <TextField label="Domain names" rows={3} value={domains} onInput={setDomains} maxLength={26_000} hint="Separated by commas or new lines." />
      ) : null}
      {init ? null : <CheckField label="Enabled" checked={enabled} onChange={setEnabled} />}
    </FormCard>
  );
}

export const routes: ScreenRoute[] = endpointRoutes<Webhook, WebhookBody>(KIND, 30, WebhookList, {
  Form: WebhookForm,
  about: (created) => (
    <p>
      The webhook <strong>{created.name}</strong> is created. Use this secret to check the signature of each request (Standard Webhooks).
    </p>
  ),
  toggled: (enabled) => (enabled ? 'The webhook is enabled again.' : 'The webhook is disabled: no events are sent to it.'),
  fields: (webhook) => (
    <>
      <dt>Events</dt>
      <dd>{eventNames(webhook)}</dd>
      <dt>Domains</dt>
      <dd>{webhook.scope === 'global' ? 'every domain of the account' : webhook.domains.join(', ') || '(none left)'}</dd>
    </>
  ),
  actions: ({ path, actions, deliveries }) => (
    <button
      type="button"
      disabled={actions.busy}
      onClick={() =>
        void actions.act(async () => {
          const answer = await extra.post<{ delivery_id?: string; message?: string }>(`${path}/test`);
          // The delivery is queued: look again once it has had a moment to go.
          setTimeout(deliveries.reload, 2000);
          return answer?.message ?? `A test event is on its way${answer?.delivery_id ? ` (delivery ${answer.delivery_id})` : ''}.`;
        })
      }
    >
      Send test event
    </button>
  ),
});
