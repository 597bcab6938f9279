import type { WriteOp } from './group-commit.ts';
import type { TlsPolicyCountsRecord } from './records.ts';
import type { Store } from './store.ts';

/**
 * The counts of TLS sessions kept for TLS reporting (RFC 8460), family `tlsReports`, one record
 * per UTC day, policy domain and policy: key `<day>:<policy domain>:<policy hash>`, so that the
 * days that have ended are one range read. Local to each node (the sessions it made itself).
 */
export class TlsReportsRepo {
  constructor(private readonly store: Store) {}

  getMany(keys: readonly string[]): Promise<Array<TlsPolicyCountsRecord | undefined>> {
    return this.store.getMany<TlsPolicyCountsRecord>('tlsReports', keys);
  }

  /** The record's whole state. */
  put(key: string, record: TlsPolicyCountsRecord): WriteOp {
    return { type: 'put', family: 'tlsReports', key, value: record };
  }

  delete(key: string): WriteOp {
    return { type: 'del', family: 'tlsReports', key };
  }

  /** Up to `limit` records of the days before `day` (YYYY-MM-DD), in key order: by day, then domain. */
  async before(day: string, limit: number): Promise<Array<[string, TlsPolicyCountsRecord]>> {
    const rows = await this.store.families.tlsReports.iterator({ lt: day, limit }).all();
    return rows as Array<[string, TlsPolicyCountsRecord]>;
  }
}
