import { addCounts, cloneCounts, type CounterCache } from './counter-cache.ts';
import type { Counts, WriteOp } from './types.ts';

/** Distinct rows (and counted tuples) waiting past which a fold starts at once (memory stays bounded). */
const MAX_PENDING_ROWS = 50_000;

/** Turns a `count` op into the adds of the counter rows it belongs to. */
export type ExpandCounts = (key: string, value: Counts) => Array<{ key: string; value: Counts }>;

/** What one log row holds: adds by counter row, and counted events by their key. */
export interface LogEntry {
  a?: Record<string, Counts>;
  c?: Record<string, Counts>;
}

/**
 * The counters' write-ahead log. A batch with `add` or `count` ops writes them as one row of the
 * family `counterLog` (summed per counter row, and per counted key), in the batch itself: the
 * counts are on disk exactly when the events they count are. A `count` is expanded into its rows
 * only when folded, so an event costs one small entry where it is recorded. Folding moves the logged adds into the counter rows in
 * a batch of its own (each row's new total, and the log rows deleted), about once a second and
 * before every read of the counters: a row written once per fold instead of once per batch. The
 * adds not folded yet are kept here; a crash leaves their log rows, read back at the next open.
 * Only folds write counter rows, one at a time, so a total is never computed from a stale value.
 */
export class CounterLog {
  private pending = new Map<string, Counts>();
  private counted = new Map<string, Counts>();
  private keys: string[] = [];
  private seq = 0;
  private folding: Promise<void> | null = null;

  constructor(
    private readonly cache: CounterCache,
    /** Starts a fold in the background (the counters repository's; it reports its own failure). */
    private readonly foldSoon: () => void,
    /** Expands `count` ops into their rows (store/counter-keys.ts). */
    private readonly expand: ExpandCounts,
  ) {}

  /** The key of the next log row. */
  nextKey(): string {
    return String(this.seq++).padStart(12, '0');
  }

  /** The adds and counts of one batch, summed per row and per counted key (the value of its log row). */
  static sum(ops: readonly WriteOp[]): LogEntry | null {
    let entry: LogEntry | null = null;
    for (const op of ops) {
      if (op.type !== 'add' && op.type !== 'count') continue;
      entry ??= {};
      const into = op.type === 'add' ? (entry.a ??= {}) : (entry.c ??= {});
      const current = into[op.key];
      if (current) addCounts(current, op.value);
      else into[op.key] = cloneCounts(op.value);
    }
    return entry;
  }

  /** A log row is on disk (written by a batch, or found at open). */
  logged(key: string, entry: LogEntry): void {
    mergeInto(this.pending, entry.a);
    mergeInto(this.counted, entry.c);
    this.keys.push(key);
    const seq = Number(key);
    if (Number.isSafeInteger(seq) && seq >= this.seq) this.seq = seq + 1;
    if (this.pending.size + this.counted.size > MAX_PENDING_ROWS) this.foldSoon();
  }

  get isEmpty(): boolean {
    return this.keys.length === 0;
  }

  /**
   * Moves what is logged now into the counter rows through `commit`; resolves once it is on disk
   * (a fold already running is waited for first). On failure the adds stay logged.
   */
  async fold(commit: (ops: WriteOp[]) => Promise<void>): Promise<void> {
    while (this.folding) await this.folding.catch(() => undefined);
    if (this.keys.length === 0) return;
    const pending = this.pending;
    const counted = this.counted;
    const keys = this.keys;
    this.pending = new Map();
    this.counted = new Map();
    this.keys = [];
    this.folding = (async () => {
      try {
        const adds = new Map<string, Counts>();
        for (const [row, value] of pending) adds.set(row, cloneCounts(value));
        for (const [key, value] of counted) {
          for (const add of this.expand(key, value)) {
            const current = adds.get(add.key);
            if (current) addCounts(current, add.value);
            else adds.set(add.key, cloneCounts(add.value));
          }
        }
        const totals = await this.cache.resolve([...adds].map(([key, value]) => ({ type: 'add', family: 'counters', key, value })));
        const ops: WriteOp[] = [...totals].map(([key, total]) => ({ type: 'put', family: 'counters', key, value: total }));
        for (const key of keys) ops.push({ type: 'del', family: 'counterLog', key });
        await commit(ops);
        this.cache.keep(totals);
      } catch (err) {
        mergeInto(pending, Object.fromEntries(this.pending));
        mergeInto(counted, Object.fromEntries(this.counted));
        this.pending = pending;
        this.counted = counted;
        this.keys = [...keys, ...this.keys];
        throw err;
      } finally {
        this.folding = null;
      }
    })();
    await this.folding;
  }

  /** Forgets everything logged (the counters and their log were emptied). */
  clear(): void {
    this.pending = new Map();
    this.counted = new Map();
    this.keys = [];
    this.cache.clear();
  }
}

/** Adds each entry of `from` into `into` (taking the objects of `from` over). */
function mergeInto(into: Map<string, Counts>, from: Record<string, Counts> | undefined): void {
  if (!from) return;
  for (const key in from) {
    const current = into.get(key);
    if (current) addCounts(current, from[key]!);
    else into.set(key, from[key]!);
  }
}
