import { addCounts } from '../store/counter-cache.ts';
import type { Counts } from '../store/group-commit.ts';
import type { Store } from '../store/store.ts';
import { encodeTag, hourKey, keyTime } from './counters.ts';

export const GROUPS = ['hour', 'day', 'week', 'month'] as const;
export type Group = (typeof GROUPS)[number];

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** A statistics question: one account, a window, a grouping, and filters (null: no filter). */
export interface StatsQuery {
  accountId: string;
  fromMs: number;
  toMs: number;
  group: Group;
  senderDomains: string[] | null;
  recipientDomains: string[] | null;
  tags: string[] | null;
}

/** One time bucket: [from, to) and the counts of the events in it. */
export interface Bucket {
  from: number;
  to: number;
  counts: Counts;
}

/**
 * Answers statistics questions from the counter rows (stats/counters.ts), never from messages.
 * The window is whole hours: `from` rounded down, `to` rounded up. Buckets are UTC hours, days,
 * weeks starting on Monday, or calendar months, cut to the window at both ends; every bucket of
 * the window is returned, empty ones too.
 *
 * Which rows: no filter reads the account's `a` rows; one kind of filter (sender domains,
 * recipient domains, or a single tag) reads that dimension's rows, one range per value; several
 * tags alone read the rows of every tag set holding any of them (a message counted once); any
 * other combination reads the finest rows of each sender domain. Hourly rows serve group_by=hour and
 * the partial days at the window's ends; daily rows the whole days between.
 */
export class Statistics {
  constructor(private readonly store: Store) {}

  async buckets(q: StatsQuery): Promise<Bucket[]> {
    const start = Math.floor(q.fromMs / HOUR_MS) * HOUR_MS;
    const end = Math.ceil(q.toMs / HOUR_MS) * HOUR_MS;
    const buckets = bucketsOf(start, end, q.group);
    const starts = buckets.map((b) => b.from);
    const into = (at: number, counts: Counts) => {
      const i = lastAtOrBefore(starts, at);
      if (i >= 0) addCounts(buckets[i]!.counts, counts);
    };
    const senders = q.senderDomains;
    const recipients = q.recipientDomains;
    const tags = q.tags;
    const filters = [senders, recipients, tags].filter((f) => f !== null).length;
    if (filters === 0) await this.rollup(q, 'a', [''], start, end, into);
    else if (filters === 1 && senders) await this.rollup(q, 's', senders, start, end, into);
    else if (filters === 1 && recipients) await this.rollup(q, 'r', recipients, start, end, into);
    else if (filters === 1 && tags && tags.length === 1) await this.rollup(q, 't', tags.map(encodeTag), start, end, into);
    else if (filters === 1 && tags) await this.rollup(q, 'g', await this.tagSetsWithAny(q.accountId, tags), start, end, into);
    else await this.fine(q, senders ?? (await this.senderDomains(q.accountId)), start, end, into);
    return buckets;
  }

  /** The sender domains the account has counts for. */
  async senderDomains(accountId: string): Promise<string[]> {
    const prefix = `i|${accountId}|`;
    const keys = (await this.store.families.counters.keys({ gt: prefix, lt: `${prefix}\xff` }).all()) as string[];
    return keys.map((k) => k.slice(prefix.length));
  }

  /** The account's tag sets that hold any of `tags`. */
  async tagSetsWithAny(accountId: string, tags: string[]): Promise<string[]> {
    const wanted = new Set(tags.map(encodeTag));
    const prefix = `j|${accountId}|`;
    const out: string[] = [];
    for await (const key of this.store.families.counters.keys({ gt: prefix, lt: `${prefix}\xff` })) {
      const set = (key as string).slice(prefix.length);
      if (set.split(',').some((t) => wanted.has(t))) out.push(set);
    }
    return out;
  }

  /** Rollup rows of one dimension: hourly at the window's partial days (or throughout for hours), daily between. */
  private async rollup(q: StatsQuery, dim: string, values: string[], start: number, end: number, into: (at: number, c: Counts) => void): Promise<void> {
    const firstDay = Math.ceil(start / DAY_MS) * DAY_MS;
    const lastDay = Math.floor(end / DAY_MS) * DAY_MS;
    const daily = q.group !== 'hour' && firstDay < lastDay;
    for (const value of [...new Set(values)]) {
      const row = `${q.accountId}|${dim}|${value}|`;
      if (!daily) {
        await this.scan(`h|${row}`, hourKey(start), hourKey(end), into);
        continue;
      }
      await this.scan(`h|${row}`, hourKey(start), hourKey(firstDay), into);
      await this.scan(`d|${row}`, hourKey(firstDay).slice(0, 8), hourKey(lastDay).slice(0, 8), into);
      await this.scan(`h|${row}`, hourKey(lastDay), hourKey(end), into);
    }
  }

  /** Rows `<prefix><time>` with time in [from, to). */
  private async scan(prefix: string, from: string, to: string, into: (at: number, c: Counts) => void): Promise<void> {
    if (from >= to) return;
    for await (const [key, value] of this.store.families.counters.iterator({ gte: prefix + from, lt: prefix + to })) {
      into(keyTime((key as string).slice(prefix.length)), value as Counts);
    }
  }

  /** The finest rows of each sender domain in the window, filtered on recipient domain and tags. */
  private async fine(q: StatsQuery, senders: string[], start: number, end: number, into: (at: number, c: Counts) => void): Promise<void> {
    const recipients = q.recipientDomains ? new Set(q.recipientDomains) : null;
    const tags = q.tags ? new Set(q.tags.map(encodeTag)) : null;
    for (const sender of [...new Set(senders)]) {
      const prefix = `f|${q.accountId}|${sender}|`;
      for await (const [key, value] of this.store.families.counters.iterator({ gte: prefix + hourKey(start), lt: prefix + hourKey(end) })) {
        const [hour, recipient, set] = (key as string).slice(prefix.length).split('|') as [string, string, string];
        if (recipients && !recipients.has(recipient)) continue;
        if (tags && !(set !== '' && set.split(',').some((t) => tags.has(t)))) continue;
        into(keyTime(hour), value as Counts);
      }
    }
  }
}

/** The buckets of [start, end) for a grouping, cut to the window. */
export function bucketsOf(start: number, end: number, group: Group): Bucket[] {
  const out: Bucket[] = [];
  for (let at = start; at < end;) {
    const next = Math.min(end, nextBoundary(at, group));
    out.push({ from: at, to: next, counts: {} });
    at = next;
  }
  return out;
}

/** How many buckets a window holds, without making them. */
export function bucketCount(start: number, end: number, group: Group): number {
  const s = Math.floor(start / HOUR_MS) * HOUR_MS;
  const e = Math.ceil(end / HOUR_MS) * HOUR_MS;
  switch (group) {
    case 'hour':
      return Math.max(0, (e - s) / HOUR_MS);
    case 'day':
      return Math.max(0, Math.ceil(e / DAY_MS) - Math.floor(s / DAY_MS));
    case 'week':
      return Math.max(0, Math.ceil((e - s) / (7 * DAY_MS)) + 1);
    case 'month':
      return Math.max(0, (new Date(e).getUTCFullYear() - new Date(s).getUTCFullYear()) * 12 + new Date(e).getUTCMonth() - new Date(s).getUTCMonth() + 1);
  }
}

/** The start of the bucket after the one holding `at`. */
function nextBoundary(at: number, group: Group): number {
  const d = new Date(at);
  switch (group) {
    case 'hour':
      return Math.floor(at / HOUR_MS) * HOUR_MS + HOUR_MS;
    case 'day':
      return Math.floor(at / DAY_MS) * DAY_MS + DAY_MS;
    case 'week': {
      // getUTCDay: 0 is Sunday; weeks start on Monday.
      const sinceMonday = (d.getUTCDay() + 6) % 7;
      return Math.floor(at / DAY_MS) * DAY_MS + (7 - sinceMonday) * DAY_MS;
    }
    case 'month':
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  }
}

/** Index of the last element ≤ `value` in an ascending list, or -1. */
function lastAtOrBefore(list: number[], value: number): number {
  let lo = 0;
  let hi = list.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid]! <= value) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}
