import { wellFormed } from '../util/json-limits.ts';
import type { WriteOp } from './group-commit.ts';
import { collectNewestFirst, type Page, type PageRequest } from './page.ts';
import type { SuppressionRecord } from './records.ts';
import type { Store } from './store.ts';
import { KeyFilter } from './key-filter.ts';
import { idFloor } from '../util/ids.ts';
import { timeKey } from '../util/time.ts';

/** What the suppression list may be filtered on; every field narrows the result. */
export interface SuppressionFilter {
  email?: string;
  domain?: string;
  /** created_at window, inclusive, in ms. */
  fromMs?: number;
  toMs?: number;
  /** Only records still in force at this time. */
  activeAt?: number;
}

/**
 * Suppressions by (account, email, domain) — the one read made before each delivery — with
 * indexes by account, domain and email (ids are UUIDv7, so each walks in creation order) and by
 * expiry, all written in the same batch as the record.
 */
export class SuppressionsRepo {
  /** Most recipients are on no list: their lookup needs no read. */
  private readonly stored: KeyFilter;

  constructor(
    private readonly store: Store,
    /** The smallest filter of stored keys, in keys. */
    filterMinKeys?: number,
  ) {
    this.stored = new KeyFilter(store, 'suppressions', filterMinKeys);
  }

  /** Resolves once no build of the filter of stored keys is under way. */
  settled(): Promise<void> {
    return this.stored.settled();
  }

  async get(accountId: string, email: string, domain: string): Promise<SuppressionRecord | undefined> {
    const key = primaryKey(accountId, email, domain);
    if (!this.stored.mayContain(key)) return undefined;
    return this.store.get<SuppressionRecord>('suppressions', key);
  }

  /** The records of one address, for every domain. */
  async forEmail(accountId: string, email: string): Promise<SuppressionRecord[]> {
    const prefix = `${accountId}:${enc(email)}:`;
    return (await this.store.families.suppressions.values({ gt: prefix, lt: `${prefix}\xff` }).all()) as SuppressionRecord[];
  }

  /** Puts the record, replacing `previous` (same key, e.g. an expired one) and its index entries. */
  put(record: SuppressionRecord, previous?: SuppressionRecord): WriteOp[] {
    const ops: WriteOp[] = previous ? this.delete(previous) : [];
    const key = primaryKey(record.accountId, record.email, record.domain);
    ops.push({ type: 'put', family: 'suppressions', key, value: record });
    for (const entry of indexKeys(record)) ops.push({ type: 'put', family: 'suppressionIndex', key: entry, value: key });
    return ops;
  }

  delete(record: SuppressionRecord): WriteOp[] {
    return [
      { type: 'del', family: 'suppressions', key: primaryKey(record.accountId, record.email, record.domain) },
      ...indexKeys(record).map((key): WriteOp => ({ type: 'del', family: 'suppressionIndex', key })),
    ];
  }

  /**
   * One page of an account's suppressions, newest first. The email or domain index drives the
   * walk when given; the other conditions are checked on each record.
   */
  async list(accountId: string, filter: SuppressionFilter, req: PageRequest): Promise<Page<SuppressionRecord>> {
    const prefix =
      filter.email !== undefined
        ? `e:${accountId}:${enc(filter.email)}:`
        : filter.domain !== undefined
          ? `d:${accountId}:${filter.domain}:`
          : `a:${accountId}:`;
    const low = filter.fromMs !== undefined ? idFloor(filter.fromMs) : '';
    const high = filter.toMs !== undefined ? idFloor(filter.toMs + 1) : '\xff';
    // Newest first: "after" a cursor means older ids, "before" means newer ones.
    const backwards = req.before !== undefined;
    const range = backwards
      ? { gt: prefix + (low > req.before! ? low : req.before!), lt: prefix + high, reverse: false }
      : { gt: prefix + low, lt: prefix + (req.after !== undefined && req.after < high ? req.after : high), reverse: true };

    return collectNewestFirst(
      this.store.families.suppressionIndex.values(range) as AsyncIterable<string>,
      (key) => this.store.get<SuppressionRecord>('suppressions', key),
      (record) => matches(record, filter),
      (record) => record.id,
      req,
    );
  }

  /** Every record of an account, or of one of its domains (for a wipe), at most `limit` after the first `skip`. */
  async some(accountId: string, domain: string | undefined, limit: number, skip = 0): Promise<SuppressionRecord[]> {
    const prefix = domain !== undefined ? `d:${accountId}:${domain}:` : `a:${accountId}:`;
    // Skipped records (kept by a wipe) come first: read past them.
    const keys = ((await this.store.families.suppressionIndex.values({ gt: prefix, lt: `${prefix}\xff`, limit: limit + skip }).all()) as string[]).slice(skip);
    const records = await Promise.all(keys.map((key) => this.store.get<SuppressionRecord>('suppressions', key)));
    return records.filter((r): r is SuppressionRecord => r !== undefined);
  }

  /** Records whose expiry passed before `nowMs`, at most `limit`. */
  async expired(nowMs: number, limit: number): Promise<SuppressionRecord[]> {
    const keys = (await this.store.families.suppressionIndex.values({ gt: 'x:', lt: `x:${timeKey(nowMs)}`, limit }).all()) as string[];
    const records = await Promise.all(keys.map((key) => this.store.get<SuppressionRecord>('suppressions', key)));
    // A record stored again under the same key since (renewed) is not expired: never purge it.
    return records.filter((r): r is SuppressionRecord => r !== undefined && Date.parse(r.expiresAt) < nowMs);
  }
}

/** Never throws: text that is not well-formed (it cannot come through the API) is encoded as UTF-8 would store it. */
const enc = (email: string) => encodeURIComponent(wellFormed(email.toLowerCase()));

function primaryKey(accountId: string, email: string, domain: string): string {
  return `${accountId}:${enc(email)}:${domain}`;
}

function indexKeys(s: SuppressionRecord): string[] {
  return [
    `a:${s.accountId}:${s.id}`,
    `d:${s.accountId}:${s.domain}:${s.id}`,
    `e:${s.accountId}:${enc(s.email)}:${s.id}`,
    `x:${timeKey(Date.parse(s.expiresAt))}:${s.id}`,
  ];
}

function matches(s: SuppressionRecord, f: SuppressionFilter): boolean {
  const created = Date.parse(s.createdAt);
  return (
    (f.email === undefined || s.email === f.email.toLowerCase()) &&
    (f.domain === undefined || s.domain === f.domain) &&
    (f.fromMs === undefined || created >= f.fromMs) &&
    (f.toMs === undefined || created <= f.toMs) &&
    (f.activeAt === undefined || Date.parse(s.expiresAt) > f.activeAt)
  );
}
