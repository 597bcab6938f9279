// Statistics: deliverability, bounces and delivery time over a period, by hour, day, week or
// month, for one sending domain or all, each as a chart and as the same figures in a table.
// The API allows one statistics request per second per account, so the three are asked one
// after the other, a second apart, and a refusal for rate is retried.
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useMemo, useState } from 'preact/hooks';
import { ApiError, v2, type SessionInfo } from '../api.ts';
import { ErrorBox, messageOf, Page } from '../ui.tsx';
import { Chart, type Line } from './chart.tsx';
import { domainsFor, holdsAll } from './scopes.ts';
import type { ScreenRoute } from './types.ts';

type Group = 'hour' | 'day' | 'week' | 'month';

interface Period {
  from_timestamp: string;
  to_timestamp: string;
}

interface DeliverabilityRow extends Period {
  reception_count: number;
  delivered_count: number;
  deferred_count: number;
  bounced_count: number;
  failed_count: number;
  suppressed_count: number;
  opened_count: number;
  clicked_count: number;
}

interface BounceRow extends Period {
  bounces: Array<{ classification: string; count: number }>;
}

interface DeliveryTimeRow extends Period {
  /** Seconds. */
  avg_delivery_time: number;
  delivered_count: number;
  delivery_times: Array<{ recipient_domain: string; delivery_time: number; count: number }>;
}

interface Answers {
  deliverability?: Answer<DeliverabilityRow>;
  bounce?: Answer<BounceRow>;
  'delivery-time'?: Answer<DeliveryTimeRow>;
}
type Answer<T> = { rows: T[] } | { error: string };
type Kind = keyof Answers;
const KINDS: Kind[] = ['deliverability', 'bounce', 'delivery-time'];

/** What the person asked: dates (UTC, inclusive) as the date inputs give them. */
interface Query {
  from: string;
  to: string;
  group: Group;
  domain: string;
}

const DAY_MS = 86_400_000;
const SPACING_MS = 1050;
const RATE_RETRIES = 4;
const MAX_DOMAIN = 253;

function isoDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

function defaultQuery(): Query {
  const today = Date.now();
  return { from: isoDate(today - 6 * DAY_MS), to: isoDate(today), group: 'day', domain: '' };
}

/** The API's parameters for a query, or why it cannot be asked. */
function parametersOf(q: Query): Record<string, string> | string {
  const from = Date.parse(`${q.from}T00:00:00Z`);
  const to = Date.parse(`${q.to}T00:00:00Z`);
  if (Number.isNaN(from) || Number.isNaN(to)) return 'Choose a date in both From and To.';
  if (from > to) return 'From must not be after To.';
  const domain = q.domain.trim().toLowerCase();
  if (domain.length > MAX_DOMAIN || /[\s,|]/.test(domain)) return 'Domain must be one domain name.';
  return {
    from_time: new Date(from).toISOString(),
    // To is a whole day: up to the next midnight.
    to_time: new Date(to + DAY_MS).toISOString(),
    group_by: q.group,
    ...(domain ? { sender_domain: domain } : {}),
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Asks the three statistics one after the other; `update` hears each answer as it comes. */
function useStatistics(session: SessionInfo, query: Query): Answers {
  const [answers, setAnswers] = useState<Answers>({});
  useEffect(() => {
    let live = true;
    setAnswers({});
    const params = parametersOf(query);
    if (typeof params === 'string') {
      setAnswers(Object.fromEntries(KINDS.map((k) => [k, { error: params }])));
      return;
    }
    const base = `/accounts/${encodeURIComponent(session.account_id ?? '')}/statistics/transactional`;
    void (async () => {
      let stop: string | null = null;
      for (const [i, kind] of KINDS.entries()) {
        if (stop === null && i > 0) await sleep(SPACING_MS);
        if (!live) return;
        let answer: Answer<never>;
        if (stop !== null) answer = { error: stop };
        else
          try {
            const list = await askRetryingForRate<{ data: never[] }>(`${base}/${kind}`, params, () => live);
            answer = { rows: list.data };
          } catch (err) {
            answer = { error: messageOf(err) };
            // A question the server refuses (bad range, a domain not allowed) is refused for all three.
            if (err instanceof ApiError && (err.status === 400 || err.status === 403)) stop = answer.error;
          }
        if (live) setAnswers((a) => ({ ...a, [kind]: answer }));
      }
    })();
    return () => {
      live = false;
    };
  }, [session.account_id, query]);
  return answers;
}

async function askRetryingForRate<T>(path: string, params: Record<string, string>, live: () => boolean): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await v2.get<T>(path, params);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 429) || attempt >= RATE_RETRIES || !live()) throw err;
      await sleep(SPACING_MS);
    }
  }
}

function StatisticsScreen(props: { session: SessionInfo }) {
  const [draft, setDraft] = useState<Query>(defaultQuery);
  const [query, setQuery] = useState<Query>(draft);
  const answers = useStatistics(props.session, query);
  const domains = useDomainChoices(props.session);
  const ids = { from: useId(), to: useId(), group: useId(), domain: useId(), list: useId() };

  // Every control applies when changed (dates and the group at once, the domain on Enter or leaving it).
  const change = (patch: Partial<Query>) => {
    const next = { ...draft, ...patch };
    setDraft(next);
    setQuery(next);
  };

  return (
    <Page title="Statistics">
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setQuery({ ...draft });
        }}
      >
        <div>
          <label for={ids.from}>From</label>
          <input id={ids.from} type="date" required value={draft.from} max={draft.to} onChange={(e) => change({ from: e.currentTarget.value })} />
        </div>
        <div>
          <label for={ids.to}>To</label>
          <input id={ids.to} type="date" required value={draft.to} min={draft.from} onChange={(e) => change({ to: e.currentTarget.value })} />
        </div>
        <div>
          <label for={ids.group}>Group by</label>
          <select id={ids.group} value={draft.group} onChange={(e) => change({ group: e.currentTarget.value as Group })}>
            <option value="hour">hour</option>
            <option value="day">day</option>
            <option value="week">week</option>
            <option value="month">month</option>
          </select>
        </div>
        <div>
          <label for={ids.domain}>Domain</label>
          <input
            id={ids.domain}
            type="text"
            list={ids.list}
            placeholder="all domains"
            maxLength={MAX_DOMAIN}
            spellcheck={false}
            autocomplete="off"
            value={draft.domain}
            onInput={(e) => setDraft({ ...draft, domain: e.currentTarget.value })}
            onChange={(e) => change({ domain: e.currentTarget.value })}
          />
          <datalist id={ids.list}>
            {domains.map((d) => (
              <option key={d} value={d} />
            ))}
          </datalist>
        </div>
        <div>
          <button type="submit">Show</button>
        </div>
      </form>
      <p class="muted">Times are in UTC; To includes the whole day. The domain is the sending domain; leave it empty for all.</p>
      <Summary deliverability={answers.deliverability} deliveryTime={answers['delivery-time']} />
      <DeliverabilityFigure answer={answers.deliverability} group={query.group} />
      <BounceFigure answer={answers.bounce} group={query.group} />
      <DeliveryTimeFigure answer={answers['delivery-time']} group={query.group} />
    </Page>
  );
}

/** The sending domains to suggest: the key's own when it is domain-scoped, else the account's (if the key may list them). */
function useDomainChoices(session: SessionInfo): string[] {
  const scoped = holdsAll(session, 'statistics-transactional:read') ? null : domainsFor(session, 'statistics-transactional:read');
  const [domains, setDomains] = useState<string[]>(scoped ?? []);
  useEffect(() => {
    if (scoped || !(session.scopes.includes('*') || session.scopes.includes('domains:read'))) return;
    let live = true;
    v2.get<{ data: Array<{ domain: string }> }>(`/accounts/${encodeURIComponent(session.account_id ?? '')}/domains`, { limit: 100 }).then(
      (list) => live && setDomains(list.data.map((d) => d.domain)),
      // Only suggestions: without them the field still takes any name.
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [session.account_id]);
  return domains;
}

function Summary(props: { deliverability?: Answer<DeliverabilityRow>; deliveryTime?: Answer<DeliveryTimeRow> }) {
  const d = props.deliverability && 'rows' in props.deliverability ? props.deliverability.rows : null;
  const t = props.deliveryTime && 'rows' in props.deliveryTime ? props.deliveryTime.rows : null;
  if (!d) return null;
  const sum = (f: (r: DeliverabilityRow) => number) => d.reduce((n, r) => n + f(r), 0);
  const received = sum((r) => r.reception_count);
  const delivered = sum((r) => r.delivered_count);
  const bounced = sum((r) => r.bounced_count);
  const failed = sum((r) => r.failed_count);
  const ended = delivered + bounced + failed;
  const timed = t ? t.reduce((n, r) => n + r.delivered_count, 0) : 0;
  const average = t && timed > 0 ? t.reduce((n, r) => n + r.avg_delivery_time * r.delivered_count, 0) / timed : null;
  return (
    <dl class="fields">
      <dt>Received</dt>
      <dd>{count(received)}</dd>
      <dt>Delivered</dt>
      <dd>
        {count(delivered)}
        {ended > 0 ? ` (${percent(delivered / ended)} of those that ended)` : ''}
      </dd>
      <dt>Bounced</dt>
      <dd>
        {count(bounced)}
        {ended > 0 ? ` (bounce rate ${percent(bounced / ended)})` : ''}
      </dd>
      <dt>Average delivery time</dt>
      <dd>{average === null ? '—' : seconds(average)}</dd>
    </dl>
  );
}

/** A figure: its caption, then loading, the error, "No data for this period", or the chart and the table. */
function Figure(props: { caption: string; answer: Answer<unknown> | undefined; empty: boolean; children: ComponentChildren }) {
  const id = useId();
  return (
    <figure class="statistic" aria-labelledby={id}>
      <figcaption id={id}>{props.caption}</figcaption>
      {props.answer === undefined ? (
        <p class="muted" aria-busy="true">
          Loading…
        </p>
      ) : 'error' in props.answer ? (
        <ErrorBox error={props.answer.error} />
      ) : props.empty ? (
        <p class="muted">No data for this period</p>
      ) : (
        props.children
      )}
    </figure>
  );
}

/** The figures as a table: a row per period that has any (periods with nothing are left out, and counted). */
function Figures<T extends Period>(props: {
  caption: string;
  group: Group;
  rows: T[];
  columns: Array<{ label: string; value: (row: T) => number; format?: (value: number) => string }>;
}) {
  const shown = props.rows.filter((row) => props.columns.some((c) => c.value(row) !== 0));
  const left = props.rows.length - shown.length;
  return (
    <>
      <div class="table-wrap figures" tabIndex={0} role="region" aria-label={`${props.caption}, figures`}>
        <table>
          <caption>{props.caption}, figures</caption>
          <thead>
            <tr>
              <th scope="col">{periodHeading(props.group)}</th>
              {props.columns.map((c) => (
                <th scope="col" key={c.label}>
                  {c.label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {shown.map((row) => (
              <tr key={row.from_timestamp}>
                <th scope="row">
                  <time dateTime={row.from_timestamp}>{periodLabel(row.from_timestamp, props.group)}</time>
                </th>
                {props.columns.map((c) => (
                  <td class="number" key={c.label}>
                    {(c.format ?? count)(c.value(row))}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {left > 0 ? (
        <p class="muted">
          {left} {left === 1 ? `${props.group} without` : `${props.group}s without`} any figure {left === 1 ? 'is' : 'are'} not listed.
        </p>
      ) : null}
    </>
  );
}

const DELIVERABILITY: Array<{ label: string; value: (r: DeliverabilityRow) => number; colour: number; charted: boolean }> = [
  { label: 'Received', value: (r) => r.reception_count, colour: 0, charted: true },
  { label: 'Delivered', value: (r) => r.delivered_count, colour: 1, charted: true },
  { label: 'Deferred', value: (r) => r.deferred_count, colour: 6, charted: true },
  { label: 'Bounced', value: (r) => r.bounced_count, colour: 2, charted: true },
  { label: 'Failed', value: (r) => r.failed_count, colour: 3, charted: true },
  { label: 'Suppressed', value: (r) => r.suppressed_count, colour: 5, charted: true },
  { label: 'Opened', value: (r) => r.opened_count, colour: 4, charted: false },
  { label: 'Clicked', value: (r) => r.clicked_count, colour: 7, charted: false },
];

function DeliverabilityFigure(props: { answer?: Answer<DeliverabilityRow>; group: Group }) {
  const rows = props.answer && 'rows' in props.answer ? props.answer.rows : [];
  const xs = useMemo(() => rows.map((r) => Date.parse(r.from_timestamp) / 1000), [rows]);
  const lines = useMemo<Line[]>(
    () => DELIVERABILITY.filter((c) => c.charted).map((c) => ({ label: c.label, colour: c.colour, values: rows.map(c.value) })),
    [rows],
  );
  const empty = rows.every((r) => DELIVERABILITY.every((c) => c.value(r) === 0));
  return (
    <Figure caption="Deliverability" answer={props.answer} empty={empty}>
      <p class="muted">Messages per {props.group} by what became of them.</p>
      <Chart label="Deliverability" time={TIME_AXES[props.group]} xs={xs} lines={lines} format={count} whole />
      <Figures caption="Deliverability" group={props.group} rows={rows} columns={DELIVERABILITY} />
    </Figure>
  );
}

function BounceFigure(props: { answer?: Answer<BounceRow>; group: Group }) {
  const rows = props.answer && 'rows' in props.answer ? props.answer.rows : [];
  const classes = useMemo(() => [...new Set(rows.flatMap((r) => r.bounces.map((b) => b.classification)))].sort(), [rows]);
  const countOf = (r: BounceRow, classification: string) => r.bounces.find((b) => b.classification === classification)?.count ?? 0;
  const xs = useMemo(() => rows.map((r) => Date.parse(r.from_timestamp) / 1000), [rows]);
  const lines = useMemo<Line[]>(() => classes.map((c, i) => ({ label: c, colour: i, values: rows.map((r) => countOf(r, c)) })), [rows, classes]);
  const columns = [
    ...classes.map((c) => ({ label: c, value: (r: BounceRow) => countOf(r, c) })),
    { label: 'Total', value: (r: BounceRow) => r.bounces.reduce((n, b) => n + b.count, 0) },
  ];
  return (
    <Figure caption="Bounces" answer={props.answer} empty={classes.length === 0}>
      <p class="muted">Bounces per {props.group} by classification.</p>
      <Chart label="Bounces" time={TIME_AXES[props.group]} xs={xs} lines={lines} format={count} whole />
      <Figures caption="Bounces" group={props.group} rows={rows} columns={columns} />
    </Figure>
  );
}

function DeliveryTimeFigure(props: { answer?: Answer<DeliveryTimeRow>; group: Group }) {
  const rows = props.answer && 'rows' in props.answer ? props.answer.rows : [];
  const xs = useMemo(() => rows.map((r) => Date.parse(r.from_timestamp) / 1000), [rows]);
  // A period with nothing delivered has no time (not a time of zero).
  const lines = useMemo<Line[]>(
    () => [{ label: 'Average delivery time', colour: 0, values: rows.map((r) => (r.delivered_count > 0 ? r.avg_delivery_time : null)) }],
    [rows],
  );
  const byDomain = useMemo(() => recipientDomains(rows), [rows]);
  return (
    <Figure caption="Delivery time" answer={props.answer} empty={rows.every((r) => r.delivered_count === 0)}>
      <p class="muted">Average time from acceptance to delivery, per {props.group}.</p>
      <Chart label="Delivery time" time={TIME_AXES[props.group]} xs={xs} lines={lines} format={seconds} />
      <Figures
        caption="Delivery time"
        group={props.group}
        rows={rows}
        columns={[
          { label: 'Delivered', value: (r) => r.delivered_count },
          { label: 'Average delivery time', value: (r) => r.avg_delivery_time, format: seconds },
        ]}
      />
      {byDomain.length === 0 ? null : (
        <div class="table-wrap" tabIndex={0} role="region" aria-label="Delivery time per recipient">
          <table>
            <caption>Delivery time by recipient domain</caption>
            <thead>
              <tr>
                <th scope="col">Recipient domain</th>
                <th scope="col">Delivered</th>
                <th scope="col">Average delivery time</th>
              </tr>
            </thead>
            <tbody>
              {byDomain.map((d) => (
                <tr key={d.domain}>
                  <th scope="row">{d.domain}</th>
                  <td class="number">{count(d.count)}</td>
                  <td class="number">{seconds(d.average)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Figure>
  );
}

/** Each recipient domain over the whole period: deliveries and their average time, the busiest first. */
function recipientDomains(rows: DeliveryTimeRow[]): Array<{ domain: string; count: number; average: number }> {
  const sums = new Map<string, { count: number; total: number }>();
  for (const row of rows)
    for (const t of row.delivery_times) {
      const s = sums.get(t.recipient_domain) ?? { count: 0, total: 0 };
      s.count += t.count;
      s.total += t.delivery_time * t.count;
      sums.set(t.recipient_domain, s);
    }
  return [...sums]
    .map(([domain, s]) => ({ domain, count: s.count, average: s.count > 0 ? s.total / s.count : 0 }))
    .sort((a, b) => b.count - a.count || a.domain.localeCompare(b.domain));
}

const HOUR_S = 3600;
const DAY_S = 86_400;
const mmdd = (seconds: number) => new Date(seconds * 1000).toISOString().slice(5, 10);
const MULTIPLES = [1, 2, 3, 7, 14, 30, 61, 91, 183, 365, 730];

/** The x axis per grouping: ticks on whole periods, in UTC, 24-hour. */
const TIME_AXES: Record<Group, { format: (seconds: number) => string; steps: number[] }> = {
  hour: {
    format: (t) => (t % DAY_S === 0 ? mmdd(t) : new Date(t * 1000).toISOString().slice(11, 16)),
    steps: [1, 2, 3, 6, 12].map((h) => h * HOUR_S).concat(MULTIPLES.map((d) => d * DAY_S)),
  },
  day: { format: mmdd, steps: MULTIPLES.map((d) => d * DAY_S) },
  week: { format: mmdd, steps: MULTIPLES.filter((d) => d >= 7).map((d) => d * DAY_S) },
  month: { format: (t) => new Date(t * 1000).toISOString().slice(0, 7), steps: MULTIPLES.filter((d) => d >= 30).map((d) => d * DAY_S) },
};

function periodHeading(group: Group): string {
  return { hour: 'Hour (UTC)', day: 'Day (UTC)', week: 'Week from (UTC)', month: 'Month (UTC)' }[group];
}

function periodLabel(iso: string, group: Group): string {
  switch (group) {
    case 'hour':
      return `${iso.slice(0, 10)} ${iso.slice(11, 16)}`;
    case 'day':
    case 'week':
      return iso.slice(0, 10);
    case 'month':
      return iso.slice(0, 7);
  }
}

function count(n: number): string {
  return Number.isInteger(n) ? n.toLocaleString() : n.toFixed(1);
}

function percent(fraction: number): string {
  return `${(fraction * 100).toFixed(fraction < 0.1 && fraction > 0 ? 2 : 1)}%`;
}

/** Seconds as people read them: 850 ms, 4.2 s, 3 min 5 s, 2 h 10 min. */
function seconds(s: number): string {
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

export const routes: ScreenRoute[] = [
  { path: '/statistics', for: 'account', nav: { label: 'Statistics', order: 50 }, render: (_p, session) => <StatisticsScreen session={session} /> },
];
