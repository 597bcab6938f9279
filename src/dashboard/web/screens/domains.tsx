// Domains: the list with each one's DNS state, adding one, and a domain's page with every record
// to publish (the exact value, copyable), what the last check found, the DKIM keys and "check now".
import { useState } from 'preact/hooks';
import { v2, type SessionInfo } from '../api.ts';
import { TableWrap, Badge, Copyable, ErrorBox, go, href, mayDo, Page, Show, useAction, useLoad, When, hashQuery } from '../ui.tsx';
import type { ScreenRoute } from './types.ts';

interface DnsRecord {
  type: string;
  label?: string;
  host: string;
  content: string;
  required: boolean;
  propagated: boolean;
  /** Not in the contract: a server may say which of the three it is, or what it found instead. */
  status?: 'propagated' | 'missing' | 'wrong';
  found?: string[] | null;
}

interface Domain {
  id: string;
  domain: string;
  created_at: string;
  updated_at: string;
  dns_records: DnsRecord[];
  last_dns_check_at: string | null;
  dns_valid: boolean;
  dns_verified_by_hand?: { at: string; by: string } | null;
  dkim_rotation_interval_days: number | null;
  dkim_selector: string | null;
  rotation_ready: boolean;
}

interface DomainList {
  data: Domain[];
  pagination: { has_more: boolean; next_cursor?: string; previous_cursor?: string };
}

/** The longest name DNS allows. */
const MAX_DOMAIN = 253;

/**
 * A record's state: propagated; wrong when the check found something else at that name; missing
 * otherwise. The API says only propagated or not, so "wrong" shows when the server tells more.
 */
export function recordState(r: DnsRecord): 'propagated' | 'missing' | 'wrong' {
  if (r.status === 'propagated' || r.status === 'missing' || r.status === 'wrong') return r.status;
  if (r.propagated) return 'propagated';
  return r.found && r.found.length > 0 ? 'wrong' : 'missing';
}

function domainState(d: Domain): string {
  return d.dns_valid ? 'verified' : d.last_dns_check_at ? 'not verified' : 'not checked';
}

function DomainsPage(props: { session: SessionInfo }) {
  const account = props.session.account_id!;
  const query = hashQuery();
  const after = query.get('after') ?? undefined;
  const before = query.get('before') ?? undefined;
  const list = useLoad(() => v2.get<DomainList>(`/accounts/${account}/domains`, { limit: 100, after, before }), [account, after, before]);
  return (
    <Page title="Domains">
      {mayDo(props.session, 'domains:write') ? <AddDomain account={account} /> : null}
      <Show loaded={list}>
        {(page) => (
          <>
            <TableWrap label="Domains (scrolls sideways)">
              <table>
                <caption>Domains</caption>
                <thead>
                  <tr>
                    <th scope="col">Domain</th>
                    <th scope="col">DNS</th>
                    <th scope="col">Records published</th>
                    <th scope="col">Last checked</th>
                  </tr>
                </thead>
                <tbody>
                  {page.data.length === 0 ? (
                    <tr>
                      <td colSpan={4} class="muted">
                        No domains yet. Add the domain you send from.
                      </td>
                    </tr>
                  ) : (
                    page.data.map((d) => {
                      const required = d.dns_records.filter((r) => r.required);
                      return (
                        <tr key={d.id}>
                          <td>
                            <a href={`#/domains/${encodeURIComponent(d.domain)}`}>{d.domain}</a>
                          </td>
                          <td>
                            <Badge value={domainState(d)} tone={d.dns_valid ? 'good' : d.last_dns_check_at ? 'bad' : 'warn'} />
                          </td>
                          <td>
                            {required.filter((r) => r.propagated).length} of {required.length} required
                          </td>
                          <td class="nowrap">
                            <When at={d.last_dns_check_at} />
                          </td>
                        </tr>
                      );
                    })
                  )}
                </tbody>
              </table>
            </TableWrap>
            {page.pagination.previous_cursor || page.pagination.next_cursor ? (
              <nav class="pager" aria-label="Pages">
                {page.pagination.previous_cursor ? <a href={href('/domains', { before: page.pagination.previous_cursor })}>Previous page</a> : null}
                {page.pagination.next_cursor ? <a href={href('/domains', { after: page.pagination.next_cursor })}>Next page</a> : null}
              </nav>
            ) : null}
          </>
        )}
      </Show>
    </Page>
  );
}

function AddDomain(props: { account: string }) {
  const [name, setName] = useState('');
  const action = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    const domain = name.trim().toLowerCase().replace(/\.$/, '');
    await action.run(async () => {
      const created = await v2.post<Domain>(`/accounts/${props.account}/domains`, { domain });
      go(`/domains/${encodeURIComponent(created.domain)}`);
    });
  };
  return (
    <>
      <form class="inline" onSubmit={(e) => void submit(e)} aria-label="Add a domain">
        <div>
          <label for="new-domain">Domain</label>
          <input
            id="new-domain"
            name="domain"
            required
            maxLength={MAX_DOMAIN}
            autocomplete="off"
            spellcheck={false}
            placeholder="example.com"
            value={name}
            onInput={(e) => setName((e.target as HTMLInputElement).value)}
          />
        </div>
        <button type="submit" disabled={action.busy}>
          Add domain
        </button>
      </form>
      <ErrorBox error={action.error} />
    </>
  );
}

function DomainPage(props: { name: string; session: SessionInfo }) {
  const path = `/accounts/${props.session.account_id!}/domains/${encodeURIComponent(props.name)}`;
  const loaded = useLoad(() => v2.get<Domain>(path), [path]);
  // A check's answer replaces what was loaded until the page is opened again.
  const [checked, setChecked] = useState<{ domain: Domain; at: number } | null>(null);
  const check = useAction();
  const domain = checked?.domain ?? loaded.data;
  const canCheck = mayDo(props.session, 'domains:write');
  const checkNow = () =>
    void check.run(async () => {
      setChecked({ domain: await v2.post<Domain>(`${path}/check-dns`), at: Date.now() });
    });
  return (
    <Page
      title={props.name}
      actions={
        canCheck ? (
          <button type="button" onClick={checkNow} disabled={check.busy || !domain}>
            {check.busy ? 'Checking…' : 'Check now'}
          </button>
        ) : null
      }
    >
      <p>
        <a href="#/domains">Back to domains</a>
      </p>
      <ErrorBox error={check.error} />
      <Show loaded={{ ...loaded, data: domain }}>
        {(d) => (
          <>
            <CheckResult domain={d} checked={checked !== null} />
            <Records domain={d} />
            <DkimKeys domain={d} />
          </>
        )}
      </Show>
    </Page>
  );
}

function CheckResult(props: { domain: Domain; checked: boolean }) {
  const d = props.domain;
  const required = d.dns_records.filter((r) => r.required);
  const wanting = required.filter((r) => recordState(r) !== 'propagated');
  return (
    <div class={props.checked ? (d.dns_valid ? 'notice good' : 'notice') : ''} role={props.checked ? 'status' : undefined}>
      <p id="check-note">
        {d.dns_valid ? (
          <>
            <Badge value="verified" />{' '}
            {d.dns_verified_by_hand
              ? `Verified by the operator${wanting.length ? `; ${wanting.length} of ${required.length} required records are not seen published` : ''}.`
              : 'Every required record is published.'}
          </>
        ) : d.last_dns_check_at ? (
          <>
            <Badge value="not verified" tone="bad" /> {wanting.length} of {required.length} required records are not published yet.
          </>
        ) : (
          <>
            <Badge value="not checked" tone="warn" /> Publish the records below, then check.
          </>
        )}{' '}
        <span class="muted">
          Last checked: <When at={d.last_dns_check_at} />
          {props.checked ? ' (a check within the last minute answers from that one)' : ''}.
        </span>
      </p>
    </div>
  );
}

function Records(props: { domain: Domain }) {
  return (
    <TableWrap label="DNS records (scrolls sideways)">
      <table>
        <caption>DNS records</caption>
        <thead>
          <tr>
            <th scope="col">Type</th>
            <th scope="col">Name</th>
            <th scope="col">Value</th>
            <th scope="col">Status</th>
          </tr>
        </thead>
        <tbody>
          {props.domain.dns_records.map((r) => {
            const state = recordState(r);
            return (
              <tr key={`${r.type} ${r.host} ${r.content}`}>
                <td>
                  {r.type}
                  {r.label ? <div class="muted">{r.label}</div> : null}
                  {r.required ? null : <div class="muted">optional</div>}
                </td>
                <td class="record-name">
                  <Copyable value={r.host} label={`name of the ${r.label ?? r.type} record`} />
                </td>
                <td class="record-value">
                  <Copyable value={r.content} label={`value of the ${r.label ?? r.type} record`} />
                  {state === 'wrong' && r.found && r.found.length > 0 ? (
                    <div class="muted">
                      Found instead: <code>{r.found.join(' | ')}</code>
                    </div>
                  ) : null}
                </td>
                <td>
                  <Badge value={state} tone={state === 'propagated' ? 'good' : r.required ? 'bad' : 'warn'} />
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </TableWrap>
  );
}

/** The DKIM keys are the domain's `_domainkey` records; their labels say active, standby or retired. */
function DkimKeys(props: { domain: Domain }) {
  const d = props.domain;
  const keys = d.dns_records.filter((r) => /\._domainkey\./i.test(r.host));
  const role = (r: DnsRecord) => /\b(active|standby|retired)\b/i.exec(r.label ?? '')?.[1]?.toLowerCase() ?? (r.required ? 'active' : 'other');
  return (
    <>
      <h2>DKIM keys</h2>
      {keys.length === 0 ? (
        <p class="muted">No DKIM key is published for this domain.</p>
      ) : (
        <ul>
          {keys.map((k) => (
            <li key={k.host}>
              <code>{k.host.slice(0, k.host.toLowerCase().indexOf('._domainkey.'))}</code>{' '}
              <Badge value={role(k)} tone={role(k) === 'active' ? 'good' : 'neutral'} />{' '}
              <Badge value={recordState(k)} tone={recordState(k) === 'propagated' ? 'good' : k.required ? 'bad' : 'warn'} />
              {k.label ? <span class="muted"> {k.label}</span> : null}
            </li>
          ))}
        </ul>
      )}
      <dl class="fields">
        <dt>Rotation</dt>
        <dd>
          {d.rotation_ready
            ? 'The standby key is published: the next rotation can switch to it.'
            : keys.some((k) => role(k) === 'standby')
              ? 'The standby key is not published yet: publish it before the next rotation.'
              : 'No rotation in progress.'}
        </dd>
        <dt>Rotation interval</dt>
        <dd>{d.dkim_rotation_interval_days ? `${d.dkim_rotation_interval_days} days` : 'the account default'}</dd>
        <dt>Selector override</dt>
        <dd>{d.dkim_selector ? <code>{d.dkim_selector}</code> : <span class="muted">none</span>}</dd>
      </dl>
    </>
  );
}

export const routes: ScreenRoute[] = [
  { path: '/domains', for: 'account', nav: { label: 'Domains', order: 20 }, render: (_, session) => <DomainsPage session={session} /> },
  { path: '/domains/:name', for: 'account', render: (params, session) => <DomainPage key={params.name} name={params.name!} session={session} /> },
];
