import type { WriteOp } from './types.ts';

// What callers build batches of; defined in store/types.ts.
export type { Counts, WriteOp } from './types.ts';

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
    // The first batch after a quiet spell waits for the end of this turn of the event loop: the
    // writers the same I/O woke (outcomes of many sessions, requests read together) share its
    // fsync instead of the first going alone and the others waiting for the next.
    await new Promise<void>((resolve) => setImmediate(resolve));
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
      await this.write(
        group.flatMap((p) => p.ops),
        group.length,
      );
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
