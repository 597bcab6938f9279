// Domains: the list with each one's DNS state, adding one, and a domain's page with every record
// to publish (the exact value, copyable), what DNS holds for it now (propagated, missing or wrong,
// and what was found instead), the DKIM keys and "check now".
import { useState } from 'preact/hooks';
import { extra, v2, type SessionInfo } from '../api.ts';
import { TableWrap, Badge, Copyable, ErrorBox, go, href, mayDo, Page, Show, useAction, useLoad, When, hashQuery } from '../ui.tsx';
import type { ScreenRoute } from './types.ts';

interface DnsRecord {
  type: string;
  label?: string;
  host: string;
  content: string;
  required: boolean;
  propagated: boolean;
}

/** A record as DNS holds it now (the dashboard's `domains/:domain/records`). */
interface LiveRecord {
  key: string;
  type: string;
  host: string;
  value: string;
  required: boolean;
  /** unknown: DNS did not answer this lookup. */
  status: 'propagated' | 'missing' | 'wrong' | 'unknown';
  /** What is at the name for that type (for a wrong record, what is there instead); null when unknown. */
  found: string[] | null;
}

interface LiveRecords {
  domain: string;
  checked_at: string;
  records: LiveRecord[];
}

/** What DNS was found to hold, by record (`type host value`); loading: not read yet; failed: the read's error. */
interface Live {
  byRecord: Map<string, LiveRecord>;
  loading: boolean;
  error: string | null;
  checkedAt: string | null;
}

type RecordStatus = 'propagated' | 'missing' | 'wrong' | 'not checked' | 'checking…';

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

const recordId = (type: string, host: string, value: string) => `${type} ${host} ${value}`;

/** What the last stored check says of a record (the API tells only propagated or not). */
function storedState(r: DnsRecord): 'propagated' | 'missing' {
  return r.propagated ? 'propagated' : 'missing';
}

/**
 * A record's state as DNS holds it now: propagated, missing or wrong; "not checked" when DNS did
 * not answer or the look-up could not be read; "checking…" while it is read.
 */
function liveState(r: DnsRecord, live: Live): { status: RecordStatus; found: string[] } {
  const found = live.byRecord.get(recordId(r.type, r.host, r.content));
  if (!found) return { status: live.loading ? 'checking…' : 'not checked', found: [] };
  return found.status === 'unknown' ? { status: 'not checked', found: [] } : { status: found.status, found: found.found ?? [] };
}

function statusTone(status: RecordStatus, required: boolean): 'good' | 'bad' | 'warn' | 'neutral' {
  if (status === 'propagated') return 'good';
  if (status === 'missing' || status === 'wrong') return required ? 'bad' : 'warn';
  return 'neutral';
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
  const looked = useLoad(() => extra.get<LiveRecords>(`${path}/records`), [path]);
  const live: Live = {
    byRecord: new Map((looked.data?.records ?? []).map((r) => [recordId(r.type, r.host, r.value), r])),
    loading: looked.loading,
    error: looked.error,
    checkedAt: looked.data?.checked_at ?? null,
  };
  // A check's answer replaces what was loaded until the page is opened again.
  const [checked, setChecked] = useState<{ domain: Domain; at: number } | null>(null);
  const check = useAction();
  const domain = checked?.domain ?? loaded.data;
  const canCheck = mayDo(props.session, 'domains:write');
  const checkNow = () =>
    void check.run(async () => {
      try {
        setChecked({ domain: await v2.post<Domain>(`${path}/check-dns`), at: Date.now() });
      } finally {
        // What DNS holds now is read again, whether or not the check could be made.
        looked.reload();
      }
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
            <Records domain={d} live={live} />
            <DkimKeys domain={d} live={live} />
          </>
        )}
      </Show>
    </Page>
  );
}

function CheckResult(props: { domain: Domain; checked: boolean }) {
  const d = props.domain;
  const required = d.dns_records.filter((r) => r.required);
  const wanting = required.filter((r) => storedState(r) !== 'propagated');
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

function Records(props: { domain: Domain; live: Live }) {
  const { live } = props;
  return (
    <>
      <p class="muted" id="records-note">
        {live.error
          ? `DNS could not be looked up just now (${live.error}): the records show as not checked.`
          : live.checkedAt
            ? 'Status: what DNS holds for each record now.'
            : 'Looking the records up in DNS…'}
        {live.checkedAt ? (
          <>
            {' '}
            Looked up: <When at={live.checkedAt} />.
          </>
        ) : null}
      </p>
      <RecordsTable domain={props.domain} live={live} />
    </>
  );
}

function RecordsTable(props: { domain: Domain; live: Live }) {
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
            const { status, found } = liveState(r, props.live);
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
                  {status === 'wrong' && found.length > 0 ? (
                    <div class="muted">
                      Found instead: <code>{found.join(' | ')}</code>
                    </div>
                  ) : null}
                </td>
                <td>
                  <Badge value={status} tone={statusTone(status, r.required)} />
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
function DkimKeys(props: { domain: Domain; live: Live }) {
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
              <Badge value={liveState(k, props.live).status} tone={statusTone(liveState(k, props.live).status, k.required)} />
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
