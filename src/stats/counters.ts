import type { EventObserver } from '../events/types.ts';
import type { Counts, WriteOp } from '../store/group-commit.ts';
import type { EventRecord, MessageRecord } from '../store/records.ts';
import { domainOf } from '../util/email.ts';

/**
 * Statistics counters: hourly and daily rows of counts, written by `add` ops in the batch of the
 * event they count (logged there, and folded into the rows: store/counter-log.ts), so that a
 * count never runs ahead of or behind its event. The statistics queries read these rows (after a
 * fold) and never the messages.
 *
 * Rows (family `counters`), times in UTC, two series per row:
 *   `h|<account>|<dim>|<value>|<YYYYMMDDHH>` hourly and `d|…|<YYYYMMDD>` daily: the counts;
 *   `ht|…|<YYYYMMDDHH>` and `dt|…|<YYYYMMDD>`: the delivery times by recipient domain (`{ dt }`),
 *      apart, so that the other queries never read them (an account's rows hold one entry per
 *      recipient domain it delivered to);
 * for the dims `a` (everything, empty value), `s` (sender domain), `r` (recipient domain), `t`
 * (one tag), `g` (a message's whole tag set, when it has tags: a query on several tags counts a
 * message once by summing the sets that hold any of them), and the pairs `sr` (`<sender
 * domain>,<recipient domain>`), `st` (`<sender domain>,<tag>`), `rt` (`<recipient domain>,<tag>`);
 *   `f|<account>|<sender domain>|<YYYYMMDDHH>|<recipient domain>|<tag set>` and the same in the
 *      order `e|<account>|<sender domain>|<recipient domain>|<YYYYMMDDHH>|<tag set>`: the finest
 *      rows (both series), for the filters no rollup answers (three dimensions, or several tags
 *      with another filter), read by sender domain or by sender and recipient domain;
 *   `i|<account>|<sender domain>` and `j|<account>|<tag set>`: the sender domains and tag sets
 *      an account has counts for.
 * Tags are URI-encoded in keys (they may hold `|` or `,`); a tag set is its sorted tags joined by `,`.
 *
 * What an event costs when the log is folded: 2 × (4 + 3 × tags + 1 if tagged) row adds, twice
 * that for a delivery (both series), plus the two finest rows and the index rows; where it is
 * recorded, one `count` entry.
 *
 * Counted (outbound mail only; sandbox mail and Postilion's own DSNs are left out):
 *   r reception · d delivered, with `dt.<recipient domain>.{ms,n}` the time from acceptance (or
 *   the scheduled first attempt) to delivery · df the message's first deferral · b bounced, with
 *   `bc.<classification>` · f failed · s suppressed · o, c the message's first open or click by a
 *   person (bots are flagged on the event and not counted here).
 */
export type CounterDelta = Counts;

/** What a counted event is attributed to. */
export interface CounterKey {
  accountId: string;
  at: number;
  senderDomain: string;
  recipientDomain: string;
  tags: readonly string[];
}

/**
 * The observer the EventRecorder calls for each event it records: one `count` op naming the
 * event's account, hour, sender and recipient domain and tag set (`countKey`), expanded into the
 * adds of its rows (`expandCount`) when the store folds its counters' log.
 */
export function countersObserver(): EventObserver {
  return (event, subject) => {
    if (!subject) return [];
    const m = subject.message;
    if (!counted(m)) return [];
    const delta = deltaOf(event, m, subject.first === true);
    if (!delta) return [];
    return [{ type: 'count', family: 'counters', key: countKey(keyOf(m, Date.parse(event.createdAt))), value: delta }];
  };
}

/** `<account>|<YYYYMMDDHH>|<sender domain>|<recipient domain>|<tag set>`: what a count op is attributed to. */
export function countKey(k: CounterKey): string {
  return `${k.accountId}|${hourKey(k.at)}|${k.senderDomain}|${k.recipientDomain}|${tagSet(k.tags)}`;
}

/** The adds of a count op (the store's `expandCounts`): the rows of counterAdds. */
export function expandCount(key: string, value: Counts): Array<{ key: string; value: Counts }> {
  const [accountId, hour, senderDomain, recipientDomain, set] = key.split('|') as [string, string, string, string, string];
  const tags = set === '' ? [] : set.split(',').map((t) => decodeURIComponent(t));
  return counterAdds({ accountId, at: keyTime(hour), senderDomain, recipientDomain, tags }, value) as Array<{ key: string; value: Counts }>;
}

/** Whether a message counts in the statistics at all. */
export function counted(m: MessageRecord): boolean {
  return m.direction === 'outbound' && m.sandbox === null && !m.isBounceNotification;
}

export function keyOf(m: MessageRecord, at: number): CounterKey {
  return { accountId: m.accountId, at, senderDomain: m.domain, recipientDomain: domainOf(m.recipient), tags: m.tags };
}

/** What one event adds, or null when it adds nothing. */
export function deltaOf(event: Pick<EventRecord, 'type'>, m: MessageRecord, first: boolean): CounterDelta | null {
  switch (event.type) {
    case 'message.reception':
      return { r: 1 };
    case 'message.delivered':
      return deliveredDelta(m);
    case 'message.transient_error':
      // A message deferred three times is one deferred message: only its first deferral counts.
      return m.attempts.slice(0, -1).some((a) => a.status === 'Deferred') ? null : { df: 1 };
    case 'message.bounced':
      return { b: 1, bc: { [m.bounceClassification || 'Uncategorized']: 1 } };
    case 'message.failed':
      return { f: 1 };
    case 'message.suppressed':
      return { s: 1 };
    case 'message.opened':
      return first ? { o: 1 } : null;
    case 'message.clicked':
      return first ? { c: 1 } : null;
    default:
      return null;
  }
}

export function deliveredDelta(m: MessageRecord): CounterDelta {
  const start = Date.parse(m.schedule?.firstAttempt ?? m.createdAt);
  const ms = Math.max(0, Date.parse(m.deliveredAt ?? m.updatedAt) - start);
  return { d: 1, dt: { [domainOf(m.recipient)]: { ms, n: 1 } } };
}

/** The add ops of one counted event: every row it belongs to. */
export function counterAdds(k: CounterKey, delta: CounterDelta): WriteOp[] {
  const hour = hourKey(k.at);
  const day = hour.slice(0, 8);
  const a = k.accountId;
  const sd = k.senderDomain;
  const rd = k.recipientDomain;
  const tags = [...new Set(k.tags)].map(encodeTag);
  const set = [...tags].sort().join(',');
  const rows = [`a|`, `s|${sd}`, `r|${rd}`, `sr|${sd},${rd}`];
  for (const tag of tags) rows.push(`t|${tag}`, `st|${sd},${tag}`, `rt|${rd},${tag}`);
  if (set !== '') rows.push(`g|${set}`);
  const { dt, ...counts } = delta;
  const series: Array<[string, string, Counts]> = [];
  if (Object.keys(counts).length > 0) series.push(['h', 'd', counts]);
  if (dt !== undefined) series.push(['ht', 'dt', { dt }]);
  const ops: WriteOp[] = [];
  for (const [hourly, daily, value] of series) {
    for (const row of rows) {
      ops.push({ type: 'add', family: 'counters', key: `${hourly}|${a}|${row}|${hour}`, value });
      ops.push({ type: 'add', family: 'counters', key: `${daily}|${a}|${row}|${day}`, value });
    }
  }
  ops.push({ type: 'add', family: 'counters', key: `f|${a}|${sd}|${hour}|${rd}|${set}`, value: delta });
  ops.push({ type: 'add', family: 'counters', key: `e|${a}|${sd}|${rd}|${hour}|${set}`, value: delta });
  // The index rows: an empty add writes them once, when they are not there yet.
  ops.push({ type: 'add', family: 'counters', key: `i|${a}|${sd}`, value: {} });
  if (set !== '') ops.push({ type: 'add', family: 'counters', key: `j|${a}|${set}`, value: {} });
  return ops;
}

/** `YYYYMMDDHH` of a time, UTC. */
export function hourKey(ms: number): string {
  const d = new Date(ms);
  return `${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}${pad(d.getUTCHours())}`;
}

/** The time of an hour (`YYYYMMDDHH`) or day (`YYYYMMDD`) key. */
export function keyTime(key: string): number {
  return Date.UTC(Number(key.slice(0, 4)), Number(key.slice(4, 6)) - 1, Number(key.slice(6, 8)), key.length >= 10 ? Number(key.slice(8, 10)) : 0);
}

export function encodeTag(tag: string): string {
  return encodeURIComponent(tag);
}

export function tagSet(tags: readonly string[]): string {
  return [...new Set(tags)].map(encodeTag).sort().join(',');
}

function pad(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}
