import type { Counts, WriteOp } from './types.ts';

/**
 * The keys of the statistics counters (family `counters`; store/counters-repo.ts reads and
 * writes them). An event is counted into hourly and daily rows, in the batch that records it
 * (logged there, and folded into the rows: store/counter-log.ts).
 *
 * Rows, times in UTC, two series per row:
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
 */

/** What a counted event is attributed to. */
export interface CounterKey {
  accountId: string;
  at: number;
  senderDomain: string;
  recipientDomain: string;
  tags: readonly string[];
}

/** A rollup row's dimension: everything, sender domain, recipient domain, tag, tag set, or a pair of them. */
export type Dimension = 'a' | 's' | 'r' | 't' | 'g' | 'sr' | 'st' | 'rt';

/** Which series of the rows: the counts, or the delivery times by recipient domain (`dt`). */
export type Series = 'counts' | 'times';

/** `<account>|<YYYYMMDDHH>|<sender domain>|<recipient domain>|<tag set>`: what a count op is attributed to. */
export function countKey(k: CounterKey): string {
  return `${k.accountId}|${hourKey(k.at)}|${k.senderDomain}|${k.recipientDomain}|${tagSet(k.tags)}`;
}

/** The adds of a count op (folded by the counters' log): the rows of counterAdds. */
export function expandCount(key: string, value: Counts): Array<{ key: string; value: Counts }> {
  const [accountId, hour, senderDomain, recipientDomain, set] = key.split('|') as [string, string, string, string, string];
  const tags = set === '' ? [] : set.split(',').map((t) => decodeURIComponent(t));
  return counterAdds({ accountId, at: keyTime(hour), senderDomain, recipientDomain, tags }, value) as Array<{ key: string; value: Counts }>;
}

/** The add ops of one counted event: every row it belongs to. */
export function counterAdds(k: CounterKey, delta: Counts): WriteOp[] {
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

/** The prefix of one rollup's rows, hourly or daily, before their time. */
export function rollupPrefix(series: Series, unit: 'hour' | 'day', accountId: string, dimension: Dimension, value: string): string {
  const kind = series === 'counts' ? (unit === 'hour' ? 'h' : 'd') : unit === 'hour' ? 'ht' : 'dt';
  return `${kind}|${accountId}|${dimension}|${value}|`;
}

/** The prefix of the finest rows of a sender domain (`f`), before their hour. */
export function finestPrefix(accountId: string, senderDomain: string): string {
  return `f|${accountId}|${senderDomain}|`;
}

/** The prefix of the finest rows of a sender and a recipient domain (`e`), before their hour. */
export function finestPairPrefix(accountId: string, senderDomain: string, recipientDomain: string): string {
  return `e|${accountId}|${senderDomain}|${recipientDomain}|`;
}

/** The prefix of an account's index rows of sender domains (`i`) or tag sets (`j`). */
export function indexPrefix(index: 'senderDomains' | 'tagSets', accountId: string): string {
  return `${index === 'senderDomains' ? 'i' : 'j'}|${accountId}|`;
}

/** The value of a pair dimension (`sr`, `st`, `rt`). */
export function pairValue(first: string, second: string): string {
  return `${first},${second}`;
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

/** The encoded tags of a tag set (none for the empty set). */
export function tagsOf(set: string): string[] {
  return set === '' ? [] : set.split(',');
}

function pad(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}
