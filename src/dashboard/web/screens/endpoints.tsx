// What webhooks and routes have in common: each is a URL of the account's application that the
// server POSTs to, signed with a secret shown once, counting its deliveries and disabled after
// failures. The list page, the new page and each one's page are the same; the kinds differ in
// their fields, their form and their actions.
import type { ComponentChildren, VNode } from 'preact';
import { useState } from 'preact/hooks';
import { extra, v2, type SessionInfo } from '../api.ts';
import { Badge, go, Page, Show, useLoad, When, type Loaded } from '../ui.tsx';
import { ConfirmDialog } from './kit/confirm.tsx';
import { useActions, type Actions } from './kit/form.tsx';
import { ListTable } from './kit/list-table.tsx';
import { useCursor, type Cursor, type ListPage } from './kit/paging.tsx';
import { ShownOnce } from './kit/shown-once.tsx';
import { seg } from './kit/text.ts';
import { RecentDeliveries, type DeliveriesAnswer } from './deliveries.tsx';
import { holdsAny } from './scopes.ts';
import type { ScreenRoute } from './types.ts';

/** The fields a webhook and a route share, as the v2 API presents them. */
export interface Endpoint {
  id: string;
  created_at: string;
  name: string;
  url: string;
  enabled: boolean;
  success_count: number;
  error_count: number;
  errors_since_last_success: number;
  last_request_at: string | null;
}

export interface Kind {
  /** "webhook", "route": in headings, buttons and sentences. */
  one: string;
  /** "Webhook": a heading's first word. */
  One: string;
  /** "Webhooks": the list's h1 and caption. */
  many: string;
  /** "webhooks": the hash route, the v2 collection and the scopes' resource. */
  resource: 'webhooks' | 'routes';
  /** What being disabled means for it, after "Disabled.". */
  whileDisabled: string;
}

/** An endpoint's form: sends `initial`'s changes (or a new one) through `onSubmit`. */
export type FormOf<E, Body> = (props: {
  initial?: E;
  title?: string;
  submitLabel: string;
  onSubmit: (body: Body) => Promise<void>;
  onCancel: () => void;
}) => ComponentChildren;

export function collection(kind: Kind, session: SessionInfo): string {
  return `/accounts/${seg(session.account_id ?? '')}/${kind.resource}`;
}

/** The list: the "New …" button, a sentence of what they are, filters if any, the table. */
export function EndpointList<E extends Endpoint>(props: {
  kind: Kind;
  session: SessionInfo;
  intro: string;
  columns: string[];
  /** The cells after the name's. */
  cells: (e: E) => ComponentChildren;
  /** Further query parameters (a domain to list). */
  query?: Record<string, string>;
  /** Refuses to list before asking (a key that may not). */
  refusal?: string;
  filters?: (reset: () => void) => ComponentChildren;
}) {
  const { kind } = props;
  const { cursor, setCursor, reset } = useCursor();
  const query = props.query ?? {};
  const loaded = useLoad(
    () => (props.refusal ? Promise.reject(new Error(props.refusal)) : v2.get<ListPage<E>>(collection(kind, props.session), { limit: 50, ...query, ...cursor })),
    [JSON.stringify(query), cursor],
  );
  return (
    <Page
      title={kind.many}
      actions={
        holdsAny(props.session, `${kind.resource}:write`) ? (
          <button type="button" onClick={() => go(`/${kind.resource}/new`)}>
            New {kind.one}
          </button>
        ) : null
      }
    >
      <p class="muted">{props.intro}</p>
      {props.filters?.(reset)}
      <Show loaded={loaded}>
        {(page) => (
          <ListTable
            caption={kind.many}
            columns={['Name', ...props.columns]}
            page={page}
            empty={`No ${kind.resource} yet.`}
            cursor={cursor}
            onPage={(c: Cursor) => setCursor(c)}
            row={(e) => (
              <tr key={e.id}>
                <td>
                  <a href={`#/${kind.resource}/${e.id}`}>{e.name || '(no name)'}</a>
                </td>
                {props.cells(e)}
              </tr>
            )}
          />
        )}
      </Show>
    </Page>
  );
}

/** Enabled or disabled, and how many deliveries failed in a row. */
export function StatusCell(props: { endpoint: Endpoint }) {
  const e = props.endpoint;
  return (
    <td>
      <Badge value={e.enabled ? 'enabled' : 'disabled'} />
      {e.errors_since_last_success > 0 ? <span class="muted"> {e.errors_since_last_success} failing</span> : null}
    </td>
  );
}

/** What a kind's new page and one's page are made of, besides its kind and the session. */
export interface Screens<E extends Endpoint, Body> {
  Form: FormOf<E, Body>;
  /** Said with the secret, once it is created. */
  about: (created: E) => ComponentChildren;
  /** The fields (dt and dd) between the URL and the counts. */
  fields: (e: E) => ComponentChildren;
  /** The buttons a key that may write has, besides Edit and Enable/Disable. */
  actions?: (tools: PageTools<E>) => ComponentChildren;
  /** Said once it is enabled or disabled. */
  toggled: (enabled: boolean) => string;
}

/** A kind's three screens: the list (in the main navigation), a new one, one's page. */
export function endpointRoutes<E extends Endpoint, Body>(
  kind: Kind,
  order: number,
  List: (props: { session: SessionInfo }) => VNode,
  screens: Screens<E, Body>,
): ScreenRoute[] {
  return [
    { path: `/${kind.resource}`, for: 'account', nav: { label: kind.many, order }, render: (_p, session) => <List session={session} /> },
    { path: `/${kind.resource}/new`, for: 'account', render: (_p, session) => <NewEndpoint kind={kind} session={session} {...screens} /> },
    { path: `/${kind.resource}/:id`, for: 'account', render: (p, session) => <EndpointPage kind={kind} session={session} id={p.id!} {...screens} /> },
  ];
}

/** A new one: the form, then its signing secret shown once with what it is and where to go. */
function NewEndpoint<E extends Endpoint, Body>(props: Screens<E, Body> & { kind: Kind; session: SessionInfo }) {
  const { kind, Form } = props;
  const [created, setCreated] = useState<(E & { secret: string }) | null>(null);
  return (
    <Page title={`New ${kind.one}`}>
      {created ? (
        <ShownOnce heading="Signing secret" what="signing secret" value={created.secret}>
          {props.about(created)}
          <p class="actions">
            <a href={`#/${kind.resource}/${created.id}`}>Open the {kind.one}</a>
            <a href={`#/${kind.resource}`}>Back to {kind.resource}</a>
          </p>
        </ShownOnce>
      ) : (
        <Form
          submitLabel={`Create ${kind.one}`}
          onSubmit={async (body) => setCreated(await v2.post<E & { secret: string }>(collection(kind, props.session), body))}
          onCancel={() => go(`/${kind.resource}`)}
        />
      )}
    </Page>
  );
}

/** What a kind's own buttons on one's page work with. */
export interface PageTools<E> {
  endpoint: E;
  /** Its v2 path, which its dashboard reads and actions share. */
  path: string;
  actions: Actions;
  deliveries: Loaded<DeliveriesAnswer>;
}

/** One's page: its fields, its counts, its recent deliveries; edit, enable/disable, delete and the kind's own actions. */
function EndpointPage<E extends Endpoint, Body>(props: Screens<E, Body> & { kind: Kind; session: SessionInfo; id: string }) {
  const { kind, Form } = props;
  const path = `${collection(kind, props.session)}/${seg(props.id)}`;
  const loaded = useLoad(() => v2.get<E>(path), [path]);
  const deliveries = useLoad(() => extra.get<DeliveriesAnswer>(`${path}/deliveries`), [path]);
  const [editing, setEditing] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const actions = useActions();
  const mayWrite = holdsAny(props.session, `${kind.resource}:write`);
  const mayDelete = holdsAny(props.session, `${kind.resource}:delete`);
  const e = loaded.data;

  const toggle = (endpoint: E) =>
    actions.act(async () => {
      await v2.put<E>(path, { enabled: !endpoint.enabled });
      loaded.reload();
      deliveries.reload();
      return props.toggled(!endpoint.enabled);
    });

  return (
    <Page
      title={e ? e.name || '(no name)' : kind.One}
      actions={
        e && !editing ? (
          <>
            {mayWrite ? (
              <>
                <button type="button" class="secondary" onClick={() => setEditing(true)}>
                  Edit
                </button>
                <button type="button" class="secondary" disabled={actions.busy} onClick={() => void toggle(e)}>
                  {e.enabled ? 'Disable' : 'Enable'}
                </button>
                {props.actions?.({ endpoint: e, path, actions, deliveries })}
              </>
            ) : null}
            {mayDelete ? (
              <button type="button" class="danger" onClick={() => setDeleting(true)}>
                Delete
              </button>
            ) : null}
          </>
        ) : null
      }
    >
      <p>
        <a href={`#/${kind.resource}`}>All {kind.resource}</a>
      </p>
      {actions.status}
      <Show loaded={loaded}>
        {(endpoint) =>
          editing ? (
            <Form
              initial={endpoint}
              title={`Edit ${kind.one}`}
              submitLabel="Save changes"
              onSubmit={async (body) => {
                await v2.put<E>(path, body);
                setEditing(false);
                actions.setNotice('Changes saved.');
                loaded.reload();
              }}
              onCancel={() => setEditing(false)}
            />
          ) : (
            <>
              {!endpoint.enabled ? (
                <DisabledNote endpoint={endpoint} reason={deliveries.data?.disabled_reason ?? null} then={props.kind.whileDisabled} />
              ) : null}
              <dl class="fields">
                <dt>Status</dt>
                <dd>
                  <Badge value={endpoint.enabled ? 'enabled' : 'disabled'} />
                </dd>
                <dt>URL</dt>
                <dd>
                  <code>{endpoint.url}</code>
                </dd>
                {props.fields(endpoint)}
                <dt>Delivered</dt>
                <dd>{endpoint.success_count}</dd>
                <dt>Failed</dt>
                <dd>{endpoint.error_count}</dd>
                <dt>Failures since the last success</dt>
                <dd>{endpoint.errors_since_last_success}</dd>
                <dt>Last request</dt>
                <dd>
                  <When at={endpoint.last_request_at} />
                </dd>
                <dt>Created</dt>
                <dd>
                  <When at={endpoint.created_at} />
                </dd>
                <dt>{kind.One} ID</dt>
                <dd>
                  <code>{endpoint.id}</code>
                </dd>
              </dl>
            </>
          )
        }
      </Show>
      {e && !editing ? <RecentDeliveries loaded={deliveries} /> : null}
      {deleting ? (
        <ConfirmDialog
          title={`Delete this ${kind.one}?`}
          confirmLabel={`Delete ${kind.one}`}
          danger
          onConfirm={async () => {
            await v2.delete(path);
            go(`/${kind.resource}`);
          }}
          onClose={() => setDeleting(false)}
        >
          <p>Nothing more is sent to its URL. This cannot be undone.</p>
        </ConfirmDialog>
      ) : null}
    </Page>
  );
}

/** Why nothing goes out: the server's reason when it disabled it itself (null when a person did, or unknown). */
function DisabledNote(props: { endpoint: Endpoint; reason: string | null; then: string }) {
  const failures = props.endpoint.errors_since_last_success;
  return (
    <p class="notice">
      <strong>Disabled.</strong> {props.reason ? `Why: ${props.reason}. ` : failures > 0 ? `Its last ${failures} deliveries failed. ` : ''}
      {props.then}
    </p>
  );
}
