import { CounterCache } from './counter-cache.ts';
import {
  counterAdds,
  countKey,
  expandCount,
  finestPairPrefix,
  finestPrefix,
  hourKey,
  indexPrefix,
  keyTime,
  rollupPrefix,
  type CounterKey,
  type Dimension,
  type Series,
} from './counter-keys.ts';
import { CounterLog, type LogEntry } from './counter-log.ts';
import type { FamilyApi } from './pg/family.ts';
import { StoreClosedError, type BatchJournal, type PutOp, type Store } from './store.ts';
import type { Counts, WriteOp } from './types.ts';

/** How often the counters' log is folded into the counter rows. */
const FOLD_INTERVAL_MS = 1000;

/** Told each row read, with the time of its hour or day: its counts are a new object, the caller's to keep. */
export type RowSink = (at: number, counts: Counts) => void;

/**
 * The statistics counters (rows and keys: store/counter-keys.ts). Counts are written as `count`
 * or `add` ops in the batch of what they count; the store writes them, summed, as one row of the
 * counters' log in that same batch (this repository is the store's journal: hand it to
 * Store.open). The log is folded into the counter rows about once a second, on close, and before
 * each read (`fold`), by this repository alone, one fold at a time.
 */
export class CountersRepo implements BatchJournal {
  private readonly cache: CounterCache;
  private readonly log: CounterLog;
  private store: Store | null = null;
  /** Set once the log is read back at open, cleared on close: folds in the background only meanwhile. */
  private timer: NodeJS.Timeout | null = null;

  /**
   * The counters of this node's store (hand them to Store.open: they are its journal); `view`: see
   * CountersRepo.published; `foldIntervalMs`: how often the log is folded in the background (tests).
   */
  constructor(
    private readonly view: { rows: FamilyApi; caughtUp: () => Promise<void> } | null = null,
    private readonly foldIntervalMs = FOLD_INTERVAL_MS,
  ) {
    this.cache = new CounterCache((keys) => this.rows.getMany(keys) as Promise<Array<Counts | undefined>>);
    this.log = new CounterLog(this.cache, () => this.foldSoon(), expandCount);
  }

  /**
   * Cluster mode: the cluster's counters as the nodes published them (cluster/publisher.ts), to
   * read only. Nothing is logged here, so `fold` folds nothing: it waits for `caughtUp` (this
   * node's events published) instead, so that a read counts what this node recorded before it.
   */
  static published(rows: FamilyApi, caughtUp: () => Promise<void>): CountersRepo {
    return new CountersRepo({ rows, caughtUp });
  }

  /** The op counting one event (`delta`, attributed to `key`): expanded into its rows when folded. */
  count(key: CounterKey, delta: Counts): WriteOp {
    return { type: 'count', family: 'counters', key: countKey(key), value: delta };
  }

  /** The ops adding `delta` to every row an event attributed to `key` belongs to (a rebuild). */
  adds(key: CounterKey, delta: Counts): WriteOp[] {
    return counterAdds(key, delta);
  }

  /**
   * Moves what the log holds into the counter rows; resolves once that is on disk (a fold under
   * way is waited for first). Whoever reads the counters folds first. On failure the adds stay logged.
   */
  async fold(): Promise<void> {
    if (this.view) return this.view.caughtUp();
    const store = this.requireStore();
    await this.log.fold((ops) => store.commit(ops));
  }

  /**
   * Deletes every counter row and the log (the counters are rebuilt from the messages): only
   * before anything adds to them.
   */
  async clear(): Promise<void> {
    const store = this.requireStore();
    await this.fold();
    await store.drain();
    await store.levels.counters.clear();
    await store.levels.counterLog.clear();
    this.log.clear();
  }

  /** The sender domains an account has counts for, in key order (the log folded by the caller). */
  async senderDomains(accountId: string): Promise<string[]> {
    const prefix = indexPrefix('senderDomains', accountId);
    const keys = await this.rows.keys({ gt: prefix, lt: `${prefix}\xff` }).all();
    return keys.map((k) => k.slice(prefix.length));
  }

  /** The tag sets (encoded: counter-keys.ts `tagsOf`) an account has counts for, in key order. */
  async *tagSets(accountId: string): AsyncGenerator<string> {
    const prefix = indexPrefix('tagSets', accountId);
    for await (const key of this.rows.keys({ gt: prefix, lt: `${prefix}\xff` })) yield key.slice(prefix.length);
  }

  /**
   * The rows of one rollup (an account's series, dimension and value), hourly or daily, whose
   * hour or day starts in [fromMs, toMs) (times on the unit's boundaries), in time order.
   */
  async rollup(
    row: { accountId: string; series: Series; dimension: Dimension; value: string },
    unit: 'hour' | 'day',
    fromMs: number,
    toMs: number,
    into: RowSink,
  ): Promise<void> {
    const prefix = rollupPrefix(row.series, unit, row.accountId, row.dimension, row.value);
    const from = unit === 'hour' ? hourKey(fromMs) : hourKey(fromMs).slice(0, 8);
    const to = unit === 'hour' ? hourKey(toMs) : hourKey(toMs).slice(0, 8);
    if (from >= to) return;
    for await (const [key, value] of this.rows.iterator({ gte: prefix + from, lt: prefix + to })) {
      into(keyTime(key.slice(prefix.length)), value as Counts);
    }
  }

  /**
   * The finest rows of a sender domain (every recipient domain), hours in [fromMs, toMs), in
   * time order, each with its tag set (encoded).
   */
  async finest(
    accountId: string,
    senderDomain: string,
    fromMs: number,
    toMs: number,
    into: (at: number, tagSet: string, counts: Counts) => void,
  ): Promise<void> {
    const prefix = finestPrefix(accountId, senderDomain);
    for await (const [key, value] of this.rows.iterator({ gte: prefix + hourKey(fromMs), lt: prefix + hourKey(toMs) })) {
      const [hour, , set] = key.slice(prefix.length).split('|') as [string, string, string];
      into(keyTime(hour), set, value as Counts);
    }
  }

  /** The finest rows of a sender and a recipient domain, as `finest`. */
  async finestTo(
    accountId: string,
    senderDomain: string,
    recipientDomain: string,
    fromMs: number,
    toMs: number,
    into: (at: number, tagSet: string, counts: Counts) => void,
  ): Promise<void> {
    const prefix = finestPairPrefix(accountId, senderDomain, recipientDomain);
    for await (const [key, value] of this.rows.iterator({ gte: prefix + hourKey(fromMs), lt: prefix + hourKey(toMs) })) {
      const rest = key.slice(prefix.length);
      into(keyTime(rest.slice(0, 10)), rest.slice(11), value as Counts);
    }
  }

  // The store's journal (BatchJournal): what the store calls, nothing else does.

  /** Reads back the log rows left by the last stop (or a crash), then folds in the background. */
  async opened(store: Store): Promise<void> {
    this.store = store;
    for await (const [key, value] of store.levels.counterLog.iterator()) this.log.logged(key, value as LogEntry);
    this.timer = setInterval(() => this.foldSoon(), this.foldIntervalMs);
    this.timer.unref();
  }

  /** The batch's adds and counts, summed, as one row of the counters' log. */
  entry(ops: readonly WriteOp[]): PutOp | null {
    const entry = CounterLog.sum(ops);
    return entry === null ? null : { type: 'put', family: 'counterLog', key: this.log.nextKey(), value: entry };
  }

  landed(entry: PutOp): void {
    this.log.logged(entry.key, entry.value as LogEntry);
  }

  /** Folds what is logged into the rows: unless writes fail (a full disk), when a fold would only fail again. */
  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    if (this.store !== null && !this.store.writeFailed) await this.fold().catch(() => undefined);
  }

  /** A fold in the background (the timer's, or a log grown large); a failure is told, and retried by the next. */
  private foldSoon(): void {
    // After a failed write the fold waits for the store's recovery: it would only fail again.
    if (this.timer === null || this.log.isEmpty || this.store === null || this.store.writeFailed) return;
    this.fold().catch((err: unknown) => {
      if (!(err instanceof StoreClosedError)) process.emitWarning(`folding the statistics counters failed: ${(err as Error).message}`);
    });
  }

  /** The counter rows. */
  private get rows(): FamilyApi {
    return this.view?.rows ?? this.requireStore().families.counters;
  }

  private requireStore(): Store {
    if (this.store === null) throw new Error('the counters are not open: hand them to Store.open first');
    return this.store;
  }
}
