import { BloomFilter } from '../util/bloom.ts';
import type { Store } from './store.ts';
import type { Family } from './types.ts';

/** The smallest filter built: 64 Ki keys in 80 KiB. */
const DEFAULT_MIN_KEYS = 65_536;

/**
 * Which keys of a family may be stored: a Bloom filter over the family's keys, so that a lookup
 * of a key that is not there (most lookups, for some families) needs no read.
 *
 * Built by scanning the family, in the background: until the first build is done, or after one
 * failed, `mayContain` answers "maybe" and callers read. Keys are learnt once their put has
 * landed (a read racing the commit may miss one, as it would have a moment earlier); while a scan
 * runs, landed keys are collected and added to the new filter too, since the scan's snapshot
 * may predate them. Past its capacity the filter is rebuilt, which also forgets deleted keys;
 * the old one serves meanwhile.
 */
export class KeyFilter {
  private filter: BloomFilter | null = null;
  private building: Promise<void> | null = null;
  /** Keys whose put landed while a scan runs. */
  private landedDuringScan: string[] | null = null;
  /** Keys seen by the last completed scan: the next build starts sized for them. */
  private lastCount = 0;

  constructor(
    private readonly store: Store,
    private readonly family: Family,
    private readonly minKeys = DEFAULT_MIN_KEYS,
  ) {
    store.onPut(family, (key) => this.landed(key));
    // Cluster mode: keys other nodes put are learnt as they are heard of (a deleted one too, which
    // costs only a read); when notifications may have been missed, lookups read until a new scan is done.
    store.onRemoteChange(family, (key) => {
      if (key !== null) return this.landed(key);
      this.filter = null;
      this.rebuild();
    });
  }

  /** False only for a key that is certainly not stored. Starts the first build. */
  mayContain(key: string): boolean {
    if (this.filter) return this.filter.mayContain(key);
    this.rebuild();
    return true;
  }

  /** Resolves once no build is under way. */
  async settled(): Promise<void> {
    while (this.building) await this.building;
  }

  private landed(key: string): void {
    this.landedDuringScan?.push(key);
    if (!this.filter) return;
    this.filter.add(key);
    if (this.filter.size > this.filter.capacity) this.rebuild();
  }

  private rebuild(): void {
    if (this.building) return;
    this.building = this.build()
      // A failed build leaves the filter as it was (or none: lookups read); the next need retries.
      .catch(() => undefined)
      .finally(() => {
        this.building = null;
      });
  }

  /** Scans the family into a filter sized for twice the keys last seen; again when that was too small. */
  private async build(): Promise<void> {
    for (;;) {
      // From here on, landed keys are collected: the scan's snapshot is taken after this.
      const landed: string[] = [];
      this.landedDuringScan = landed;
      try {
        const filter = new BloomFilter(Math.max(this.minKeys, 2 * this.lastCount));
        let count = 0;
        for await (const key of this.store.families[this.family].keys()) {
          filter.add(key);
          count += 1;
        }
        for (const key of landed) filter.add(key);
        this.lastCount = count + landed.length;
        if (filter.size <= filter.capacity) {
          this.filter = filter;
          return;
        }
      } finally {
        this.landedDuringScan = null;
      }
    }
  }
}
