import type { Family } from './store.ts';

/** A tree of counts: numbers, or named counts nested (see store/counter-cache.ts). */
export interface Counts {
  [name: string]: number | Counts;
}

export type WriteOp =
  /**
   * `latest`: the value is the whole current state of the key (a counter row written at each
   * change), so a later put of the same key in the same batch supersedes it and only that one
   * is written.
   *
   * `keyAtCommit`: the key is made when the batch is handed to the committer (Store.commit), so
   * that keys made this way sort in the order their batches land, whenever the op was built.
   */
  | { type: 'put'; family: Family; key: string; value: unknown; latest?: true; keyAtCommit?: () => string }
  | { type: 'del'; family: Family; key: string }
  /**
   * Adds `value` to the counts stored under `key` (absent: zero): logged in its batch, and added
   * to the row when the counters' log is folded (store/counter-log.ts), so that concurrent
   * writers never lose an increment.
   */
  | { type: 'add'; family: 'counters'; key: string; value: Counts }
  /**
   * A counted event: `key` names what it is attributed to (its account, hour, dimensions), and
   * the store's `expandCounts` turns it into the adds of every counter row it belongs to when the
   * counters' log is folded (store/counter-log.ts): one small entry per event on the hot path.
   */
  | { type: 'count'; family: 'counters'; key: string; value: Counts };

interface Pending {
  ops: WriteOp[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit: writes submitted while a synced batch is on its way to disk are gathered
 * into the next single batch, so N concurrent writers cost one fsync, not N. Each caller's
 * promise settles only after the batch holding its ops is synced.
 */
export class GroupCommitter {
  private queue: Pending[] = [];
  private running: Promise<void> | null = null;
  readonly stats = { batches: 0, writes: 0 };
  /** Told of every synced batch: how long it took, its operations and its writers (metrics). */
  observer: ((seconds: number, operations: number, writers: number) => void) | null = null;

  constructor(private readonly writeBatch: (ops: WriteOp[]) => Promise<void>) {}

  submit(ops: WriteOp[]): Promise<void> {
    if (ops.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ops, resolve, reject });
      this.running ??= this.run();
    });
  }

  /** Resolves once everything submitted so far is written. */
  async drain(): Promise<void> {
    while (this.running) await this.running;
  }

  private async run(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const group = this.queue;
        this.queue = [];
        await this.flush(group);
      }
    } finally {
      this.running = null;
    }
  }

  private async flush(group: Pending[]): Promise<void> {
    try {
      await this.write(group.flatMap((p) => p.ops), group.length);
      for (const p of group) p.resolve();
    } catch (err) {
      if (group.length === 1) {
        group[0]!.reject(err);
        return;
      }
      // One caller's bad op must not fail the others: retry each on its own.
      for (const p of group) {
        try {
          await this.write(p.ops, 1);
          p.resolve();
        } catch (own) {
          p.reject(own);
        }
      }
    }
  }

  private async write(ops: WriteOp[], writers: number): Promise<void> {
    const started = this.observer ? process.hrtime.bigint() : 0n;
    await this.writeBatch(ops);
    this.stats.batches += 1;
    this.stats.writes += writers;
    this.observer?.(Number(process.hrtime.bigint() - started) / 1e9, ops.length, writers);
  }
}
