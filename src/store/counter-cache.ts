import { Lru } from '../util/lru.ts';
import type { Counts, WriteOp } from './types.ts';

type AddOp = Extract<WriteOp, { type: 'add' }>;

/**
 * The current value of counter rows, for folding the counters' log (store/counter-log.ts): the
 * adds of a fold become puts of the new totals (an empty add only creates a row that is not there
 * yet: the index rows). Folds run one at a time and are the only writers of counter rows, so the
 * total read here is always the one on disk plus the adds before it, and no increment is lost.
 * Rows read or written lately stay in memory (bounded: past
 * `max` rows the least recently used go, to be read again from the store when next needed).
 */
export class CounterCache {
  private readonly rows: Lru<string, Counts>;

  constructor(
    /** Reads rows from the store (absent: undefined). */
    private readonly read: (keys: string[]) => Promise<Array<Counts | undefined>>,
    max = 100_000,
  ) {
    this.rows = new Lru(max);
  }

  /**
   * The new totals of the rows the adds touch, not yet kept: `keep` them once the batch is on
   * disk (a batch that fails leaves the cache as it was).
   */
  async resolve(adds: AddOp[]): Promise<Map<string, Counts>> {
    let missing: Set<string> | null = null;
    for (const op of adds) if (!this.rows.has(op.key)) (missing ??= new Set()).add(op.key);
    const loaded = new Map<string, Counts>();
    /** Rows not in the store yet: written even when only an empty add (an index row) touches them. */
    const absent = new Set<string>();
    if (missing !== null) {
      const keys = [...missing];
      const values = await this.read(keys);
      keys.forEach((key, i) => {
        loaded.set(key, values[i] ?? {});
        if (values[i] === undefined) absent.add(key);
      });
    }
    const next = new Map<string, Counts>();
    for (const op of adds) {
      let total = next.get(op.key);
      if (total === undefined) {
        // An empty add to a row that exists changes nothing: nothing to write.
        if (!absent.has(op.key) && isEmpty(op.value)) continue;
        total = cloneCounts(this.rows.get(op.key) ?? loaded.get(op.key)!);
        next.set(op.key, total);
      }
      addCounts(total, op.value);
    }
    return next;
  }

  keep(totals: Map<string, Counts>): void {
    for (const [key, total] of totals) this.rows.set(key, total);
  }

  /** Forgets every row (after the counters family was rewritten outside adds). */
  clear(): void {
    this.rows.clear();
  }
}

/** Adds `delta` into `total`, branch by branch. */
export function addCounts(total: Counts, delta: Counts): Counts {
  for (const name in delta) {
    const value = delta[name]!;
    const current = total[name];
    if (typeof value === 'number') total[name] = (typeof current === 'number' ? current : 0) + value;
    else total[name] = addCounts(typeof current === 'object' ? current : {}, value);
  }
  return total;
}

function isEmpty(counts: Counts): boolean {
  for (const _ in counts) return false;
  return true;
}

/** A deep copy of counts (plain objects of numbers: cheaper than structuredClone). */
export function cloneCounts(counts: Counts): Counts {
  const out: Counts = {};
  for (const name in counts) {
    const value = counts[name]!;
    out[name] = typeof value === 'number' ? value : cloneCounts(value);
  }
  return out;
}
