import type { WriteOp } from '../store/group-commit.ts';
import type { Store } from '../store/store.ts';
import type { Family } from '../store/types.ts';
import { Lru } from '../util/lru.ts';

export interface TargetCounts {
  successCount: number;
  errorCount: number;
  errorsSinceLastSuccess: number;
  lastRequestAt: string | null;
}

const ZERO: TargetCounts = { successCount: 0, errorCount: 0, errorsSinceLastSuccess: 0, lastRequestAt: null };
/** Targets whose counters are kept at most (then the least recently used go, read again when next needed). */
const TARGETS_KEPT = 20_000;

/**
 * The delivery counters of webhooks or routes, apart from their records so that an attempt's
 * outcome never rewrites what the API changed. This process owns them: once read they are kept
 * in memory, each attempt changes them in place and puts the whole value in its outcome batch
 * (batches land in order, so the last value written is the newest).
 */
export class TargetCounters {
  private readonly known = new Lru<string, TargetCounts>(TARGETS_KEPT);

  constructor(
    private readonly store: Store,
    private readonly family: Family,
  ) {}

  async of(targetId: string): Promise<TargetCounts> {
    const cached = this.known.get(targetId);
    if (cached) return { ...cached };
    const stored = (await this.store.get<TargetCounts>(this.family, targetId)) ?? ZERO;
    // Another attempt may have loaded them while this read was under way.
    const now = this.known.get(targetId) ?? { ...stored };
    this.known.set(targetId, now);
    return { ...now };
  }

  /** The record with its current counters (what the API shows). */
  async overlay<T extends { id: string }>(record: T): Promise<T & TargetCounts> {
    return { ...record, ...(await this.of(record.id)) };
  }

  /** Counts one attempt; returns the new counters and the op that stores them. */
  async count(targetId: string, ok: boolean, at: string): Promise<{ counts: TargetCounts; op: WriteOp }> {
    await this.of(targetId);
    const c = this.known.get(targetId)!;
    if (ok) {
      c.successCount += 1;
      c.errorsSinceLastSuccess = 0;
    } else {
      c.errorCount += 1;
      c.errorsSinceLastSuccess += 1;
    }
    if (c.lastRequestAt === null || at > c.lastRequestAt) c.lastRequestAt = at;
    return { counts: { ...c }, op: this.put(targetId, c) };
  }

  /** Enabled again by its owner: the run of failures starts over. */
  async resetErrors(targetId: string): Promise<WriteOp> {
    await this.of(targetId);
    const c = this.known.get(targetId)!;
    c.errorsSinceLastSuccess = 0;
    return this.put(targetId, c);
  }

  forget(targetId: string): WriteOp {
    this.known.delete(targetId);
    return { type: 'del', family: this.family, key: targetId };
  }

  private put(targetId: string, c: TargetCounts): WriteOp {
    return { type: 'put', family: this.family, key: targetId, value: { ...c }, latest: true };
  }
}
