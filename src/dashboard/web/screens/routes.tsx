// Inbound routes: mail to a recipient pattern of the account's domains is POSTed, parsed, to a
// URL. The list, a new route (its signing secret shown once), and each route's page with its
// recent deliveries, edit, enable/disable and delete, all through the v2 operations.
import { useId, useState } from 'preact/hooks';
import type { SessionInfo } from '../api.ts';
import { When } from '../ui.tsx';
import { endpointRoutes, EndpointList, StatusCell, type Endpoint, type Kind } from './endpoints.tsx';
import { CheckField, TextField } from './kit/fields.tsx';
import { FormCard } from './kit/form.tsx';
import { domainsFor, holdsAll } from './scopes.ts';
import type { ScreenRoute } from './types.ts';

const KIND: Kind = {
  one: 'route',
  One: 'Route',
  many: 'Routes',
  resource: 'routes',
  whileDisabled: 'New mail to its recipient is refused until it is enabled again.',
};

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
interface Route extends Endpoint, Options {
  object: 'route';
  updated_at: string;
  recipient: string;
}

/** The bounds the API holds a route to (its schema). */
const MAX_NAME = 255;
const MAX_URL = 2048;
const MAX_RECIPIENT = 255;

function optionNames(r: Options): string {
  const names = OPTIONS.filter(([field]) => r[field]).map(([, name]) => name.toLowerCase());
  return names.length === 0 ? 'none' : names.join(', ');
}

function RouteList(props: { session: SessionInfo }) {
  // A key that reads routes of some domains only must name one to list (the API's rule).
  const scoped = holdsAll(props.session, 'routes:read') ? null : domainsFor(props.session, 'routes:read');
  const [domain, setDomain] = useState(scoped?.[0] ?? '');
  const domainId = useId();
  return (
    <EndpointList<Route>
      kind={KIND}
      session={props.session}
      intro="Routes take mail sent to your domains and POST it, parsed into JSON, to your application."
      query={domain ? { domain } : {}}
      refusal={scoped && scoped.length === 0 ? 'This API key may not read routes.' : undefined}
      filters={(reset) =>
        scoped && scoped.length > 1 ? (
          <form class="filters" onSubmit={(e) => e.preventDefault()}>
            <div>
              <label for={domainId}>Domain</label>
              <select
                id={domainId}
                value={domain}
                onChange={(e) => {
                  setDomain(e.currentTarget.value);
                  reset();
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
        ) : null
      }
      columns={['Recipient', 'URL', 'Status', 'Last request']}
      cells={(r) => (
        <>
          <td>
            <code>{r.recipient}</code>
          </td>
          <td>
            <code>{r.url}</code>
          </td>
          <StatusCell endpoint={r} />
          <td>
            <When at={r.last_request_at} />
          </td>
        </>
      )}
    />
  );
}

interface RouteBody extends Options {
  name: string;
  url: string;
  recipient: string;
  enabled?: boolean;
}

function RouteForm(props: { initial?: Route; title?: string; submitLabel: string; onSubmit: (body: RouteBody) => Promise<void>; onCancel: () => void }) {
  const init = props.initial;
  const [name, setName] = useState(init?.name ?? '');
  const [url, setUrl] = useState(init?.url ?? '');
  const [recipient, setRecipient] = useState(init?.recipient ?? '');
  const [options, setOptions] = useState<Options>(() => Object.fromEntries(OPTIONS.map(([field]) => [field, init ? init[field] : false])) as Options);
  const [enabled, setEnabled] = useState(true);

  return (
    <FormCard
      title={props.title}
      submitLabel={props.submitLabel}
      onSubmit={() => props.onSubmit({ name: name.trim(), url: url.trim(), recipient: recipient.trim(), ...options, ...(init ? {} : { enabled }) })}
      onCancel={props.onCancel}
    >
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
      <fieldset>
        <legend>Options</legend>
        {OPTIONS.map(([field, label, hint]) => (
          <CheckField key={field} label={label} hint={hint} checked={options[field]} onChange={(on) => setOptions({ ...options, [field]: on })} />
        ))}
      </fieldset>
      {init ? null : <CheckField label="Enabled" checked={enabled} onChange={setEnabled} />}
    </FormCard>
  );
}

export const routes: ScreenRoute[] = endpointRoutes<Route, RouteBody>(KIND, 40, RouteList, {
  Form: RouteForm,
  about: (created) => (
    <p>
      The route <strong>{created.name}</strong> is created: mail to <code>{created.recipient}</code> goes to your URL, signed with this secret.
    </p>
  ),
  toggled: (enabled) => (enabled ? 'The route is enabled again.' : 'The route is disabled: new mail to its recipient is refused.'),
  fields: (route) => (
    <>
      <dt>Recipient</dt>
      <dd>
        <code>{route.recipient}</code>
      </dd>
      <dt>Options</dt>
      <dd>{optionNames(route)}</dd>
    </>
  ),
});
