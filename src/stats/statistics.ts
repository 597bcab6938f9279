import { encodeTag, pairValue, tagsOf, type Dimension, type Series } from '../store/counter-keys.ts';
import type { CountersRepo } from '../store/counters-repo.ts';
import type { Counts } from '../store/group-commit.ts';

export const GROUPS = ['hour', 'day', 'week', 'month'] as const;
export type Group = (typeof GROUPS)[number];

const HOUR_MS = 3_600_000;
/** Pair rows are read while the filter values make at most this many pairs (each pair: up to three range reads). */
export const PAIR_VALUES = 100;
const DAY_MS = 24 * HOUR_MS;

/** A statistics question: one account, a window, a grouping, and filters (null: no filter). */
export interface StatsQuery {
  accountId: string;
  /** Which series of the rows: the counts, or the delivery times by recipient domain (`dt`). */
  series: Series;
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
 * Answers statistics questions from the counter rows (store/counter-keys.ts), never from messages.
 * The window is whole hours: `from` rounded down, `to` rounded up. Buckets are UTC hours, days,
 * weeks starting on Monday, or calendar months, cut to the window at both ends; every bucket of
 * the window is returned, empty ones too.
 *
 * Which rows: no filter reads the account's `a` rows; one kind of filter (sender domains,
 * recipient domains, or a single tag) reads that dimension's rows, one range per value; several
 * tags alone read tag-set rows (a message counted once; see severalTags); two
 * kinds with a single tag among them read the pair rows (`sr`, `st`, `rt`) while the values make
 * at most PAIR_VALUES pairs; anything else reads the finest rows of each sender domain (all of
 * the account's when no sender domain is given: the one slow shape, recipient domains with
 * several tags, or all three filters without a sender domain). Hourly rows serve group_by=hour
 * and the partial days at the window's ends; daily rows the whole days between.
 */
export class Statistics {
  constructor(private readonly counters: CountersRepo) {}

  async buckets(q: StatsQuery): Promise<Bucket[]> {
    // Whatever the counters' log holds goes into the rows first: the answer counts every event on disk.
    await this.counters.fold();
    const start = Math.floor(q.fromMs / HOUR_MS) * HOUR_MS;
    const end = Math.ceil(q.toMs / HOUR_MS) * HOUR_MS;
    const buckets = bucketsOf(start, end, q.group);
    const starts = buckets.map((b) => b.from);
    const filled = new Set<number>();
    const into = (at: number, counts: Counts, factor = 1) => {
      const i = lastAtOrBefore(starts, at);
      if (i < 0) return;
      // A row read from the store is this query's own object: the first one into a bucket is taken as it is.
      if (factor === 1 && !filled.has(i)) buckets[i]!.counts = counts;
      else addScaled(buckets[i]!.counts, counts, factor);
      filled.add(i);
    };
    const senders = q.senderDomains ? [...new Set(q.senderDomains)] : null;
    const recipients = q.recipientDomains ? [...new Set(q.recipientDomains)] : null;
    const tags = q.tags ? [...new Set(q.tags.map(encodeTag))] : null;
    const oneTag = tags?.length === 1 ? tags[0]! : null;
    const pairs = (xs: string[], ys: string[]) => (xs.length * ys.length <= PAIR_VALUES ? xs.flatMap((x) => ys.map((y) => pairValue(x, y))) : null);
    const rollup = (dim: Dimension, values: string[], factor = 1) => this.rollup(q, dim, values, start, end, (at, c) => into(at, c, factor));
    let plan: Promise<void> | null = null;
    if (!senders && !recipients && !tags) plan = rollup('a', ['']);
    else if (senders && !recipients && !tags) plan = rollup('s', senders);
    else if (!senders && recipients && !tags) plan = rollup('r', recipients);
    else if (!senders && !recipients && tags) plan = oneTag !== null ? rollup('t', [oneTag]) : this.severalTags(q.accountId, tags, rollup);
    else if (senders && recipients && !tags) {
      const values = pairs(senders, recipients);
      if (values) plan = rollup('sr', values);
    } else if (senders && !recipients && oneTag !== null) {
      const values = pairs(senders, [oneTag]);
      if (values) plan = rollup('st', values);
    } else if (!senders && recipients && oneTag !== null) {
      const values = pairs(recipients, [oneTag]);
      if (values) plan = rollup('rt', values);
    }
    await (plan ?? this.fine(q, senders ?? (await this.counters.senderDomains(q.accountId)), start, end, into));
    return buckets;
  }

  /** The sender domains the account has counts for. */
  async senderDomains(accountId: string): Promise<string[]> {
    await this.counters.fold();
    return this.counters.senderDomains(accountId);
  }

  /** The account's tag sets (encoded) that hold any of `tags` (encoded as in keys). */
  async tagSetsWithAny(accountId: string, tags: string[]): Promise<string[]> {
    await this.counters.fold();
    return (await this.tagSetOverlaps(accountId, tags)).map(([set]) => set);
  }

  /** The account's tag sets holding any of `tags`, each with how many of them it holds. */
  private async tagSetOverlaps(accountId: string, tags: string[]): Promise<Array<[string, number]>> {
    const wanted = new Set(tags);
    const out: Array<[string, number]> = [];
    for await (const set of this.counters.tagSets(accountId)) {
      const overlap = tagsOf(set).filter((t) => wanted.has(t)).length;
      if (overlap > 0) out.push([set, overlap]);
    }
    return out;
  }

  /**
   * Messages with any of several tags, each once. Either the sum of the tag sets holding any of
   * them, or, when that reads fewer rows, the tags' own rows minus the sets holding k ≥ 2 of them
   * taken k − 1 times (a message with two of the tags is in two tag rows and must count once).
   */
  private async severalTags(accountId: string, tags: string[], rollup: (dim: Dimension, values: string[], factor?: number) => Promise<void>): Promise<void> {
    const overlaps = await this.tagSetOverlaps(accountId, tags);
    const several = overlaps.filter(([, k]) => k >= 2);
    if (overlaps.length <= tags.length + several.length)
      return rollup(
        'g',
        overlaps.map(([set]) => set),
      );
    await rollup('t', tags);
    for (const [set, k] of several) await rollup('g', [set], -(k - 1));
  }

  /** Rollup rows of one dimension: hourly at the window's partial days (or throughout for hours), daily between. */
  private async rollup(q: StatsQuery, dim: Dimension, values: string[], start: number, end: number, into: (at: number, c: Counts) => void): Promise<void> {
    const firstDay = Math.ceil(start / DAY_MS) * DAY_MS;
    const lastDay = Math.floor(end / DAY_MS) * DAY_MS;
    const daily = q.group !== 'hour' && firstDay < lastDay;
    for (const value of [...new Set(values)]) {
      const row = { accountId: q.accountId, series: q.series, dimension: dim, value };
      if (!daily) {
        await this.counters.rollup(row, 'hour', start, end, into);
        continue;
      }
      await this.counters.rollup(row, 'hour', start, firstDay, into);
      await this.counters.rollup(row, 'day', firstDay, lastDay, into);
      await this.counters.rollup(row, 'hour', lastDay, end, into);
    }
  }

  /**
   * The finest rows in the window, filtered on recipient domain and tags: by sender domain and
   * recipient domain (`e` rows, one range per pair) when both are given, else by sender domain
   * (`f` rows, every recipient domain of each).
   */
  private async fine(q: StatsQuery, senders: string[], start: number, end: number, into: (at: number, c: Counts) => void): Promise<void> {
    const tags = q.tags ? new Set(q.tags.map(encodeTag)) : null;
    const wanted = (set: string) => !tags || tagsOf(set).some((t) => tags.has(t));
    const row = (at: number, set: string, counts: Counts) => {
      if (wanted(set)) into(at, counts);
    };
    const recipients = q.recipientDomains ? [...new Set(q.recipientDomains)] : null;
    if (recipients) {
      for (const sender of new Set(senders)) {
        for (const recipient of recipients) await this.counters.finestTo(q.accountId, sender, recipient, start, end, row);
      }
      return;
    }
    for (const sender of new Set(senders)) await this.counters.finest(q.accountId, sender, start, end, row);
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
  if (e <= s) return 0;
  switch (group) {
    case 'hour':
      return (e - s) / HOUR_MS;
    case 'day':
      return Math.ceil(e / DAY_MS) - Math.floor(s / DAY_MS);
    case 'week': {
      const first = nextBoundary(s, 'week');
      return first >= e ? 1 : 1 + Math.ceil((e - first) / (7 * DAY_MS));
    }
    case 'month': {
      const from = new Date(s);
      const to = new Date(e - 1);
      return (to.getUTCFullYear() - from.getUTCFullYear()) * 12 + to.getUTCMonth() - from.getUTCMonth() + 1;
    }
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

/** Adds `factor` × `delta` into `total`, nested counts too (factor −1: subtracts). */
function addScaled(total: Counts, delta: Counts, factor: number): void {
  for (const name in delta) {
    const value = delta[name]!;
    const current = total[name];
    if (typeof value === 'number') total[name] = (typeof current === 'number' ? current : 0) + factor * value;
    else addScaled(typeof current === 'object' ? current : (total[name] = {}), value, factor);
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
