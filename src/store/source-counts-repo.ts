import type { Store } from './store.ts';

/** Messages sent from one delivery source on one UTC day (for its warm-up cap). */
export interface SourceCountRecord {
  v: 1;
  /** "YYYY-MM-DD" (UTC). */
  day: string;
  sent: number;
}

/**
 * The `meta` family's `source-sent:<source>` entries: each source's count of the day. Local to the
 * node, as its addresses are.
 */
export class SourceCountsRepo {
  constructor(private readonly store: Store) {}

  async get(source: string): Promise<SourceCountRecord | undefined> {
    return (await this.store.get<SourceCountRecord>('meta', `source-sent:${source}`)) ?? undefined;
  }

  /** Writes the counts (one synced batch). */
  put(counts: ReadonlyMap<string, SourceCountRecord>): Promise<void> {
    return this.store.commit([...counts].map(([source, value]) => ({ type: 'put' as const, family: 'meta' as const, key: `source-sent:${source}`, value })));
  }
}
