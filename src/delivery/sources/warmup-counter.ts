import type { Logger } from 'pino';
import type { SourceCountRecord, SourceCountsRepo } from '../../store/source-counts-repo.ts';
import type { Clock } from '../../util/time.ts';
import type { Source } from './sources.ts';
import { dayOf, warmupCap } from './warmup.ts';

/** How often the day's counts are written when they changed (ms); a crash loses at most this much counting. */
const FLUSH_MS = 1000;

/**
 * What each source in warm-up has sent today, against its cap. Counted in memory as messages are
 * admitted, written to the store about once a second and at stop, read back at start: a restart
 * does not give a source its day's cap again.
 */
export class WarmupCounter {
  private readonly counts = new Map<string, SourceCountRecord>();
  private readonly dirty = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly repo: SourceCountsRepo,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** Reads today's counts of the sources in warm-up. */
  async load(sources: readonly Source[]): Promise<void> {
    const today = dayOf(this.clock.now());
    for (const source of sources) {
      if (!source.warmup) continue;
      const stored = await this.repo.get(source.name);
      if (stored?.day === today) this.counts.set(source.name, stored);
    }
  }

  /** Messages the source may still send today (Infinity: no cap). */
  remaining(source: Source): number {
    const now = this.clock.now();
    const cap = warmupCap(source.warmup, now);
    if (cap === null) return Infinity;
    const count = this.counts.get(source.name);
    return Math.max(cap - (count?.day === dayOf(now) ? count.sent : 0), 0);
  }

  /** Counts one message from the source when it is under its cap; false (nothing counted) when it is not. */
  take(source: Source): boolean {
    if (this.remaining(source) <= 0) return false;
    if (!source.warmup) return true;
    const day = dayOf(this.clock.now());
    const count = this.counts.get(source.name);
    this.counts.set(source.name, { v: 1, day, sent: count?.day === day ? count.sent + 1 : 1 });
    this.dirty.add(source.name);
    this.timer ??= setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, FLUSH_MS);
    this.timer.unref();
    return true;
  }

  /** Writes the counts changed since the last write. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.dirty.size === 0) return this.flushing;
    const changed = new Map([...this.dirty].map((name) => [name, this.counts.get(name)!]));
    this.dirty.clear();
    this.flushing = this.flushing
      .then(() => this.repo.put(changed))
      .catch((err: unknown) => {
        this.log.warn({ err, sources: [...changed.keys()] }, 'could not write the warm-up counts; written again with the next');
        for (const name of changed.keys()) this.dirty.add(name);
      });
    return this.flushing;
  }
}
