import { createHash } from 'node:crypto';
import { timeKey } from '../util/time.ts';
import type { WriteOp } from './group-commit.ts';
import type { IdempotencyRecord } from './records.ts';
import type { Store } from './store.ts';

/** Idempotency records, with an expiry index so the purge never scans live records. */
export class IdempotencyRepo {
  constructor(private readonly store: Store) {}

  get(accountId: string, key: string): Promise<IdempotencyRecord | undefined> {
    return this.store.get<IdempotencyRecord>('idempotency', recordKey(accountId, key));
  }

  /**
   * Writes the record durably, moving its expiry index entry from `previous` if there was one.
   * Only over `previous` (none: only if there is no record): a record another node wrote
   * meanwhile fails it with WriteConflictError (store.ts).
   */
  async save(record: IdempotencyRecord, previous?: IdempotencyRecord): Promise<void> {
    const key = recordKey(record.accountId, record.key);
    const ops: WriteOp[] = [];
    if (previous) ops.push({ type: 'del', family: 'idempotencyByExpiry', key: expiryKey(previous.expiresAt, key) });
    ops.push(
      { type: 'put', family: 'idempotency', key, value: record, expected: previous ?? null },
      { type: 'put', family: 'idempotencyByExpiry', key: expiryKey(record.expiresAt, key), value: key },
    );
    await this.store.commit(ops);
  }

  async remove(record: IdempotencyRecord): Promise<void> {
    const key = recordKey(record.accountId, record.key);
    await this.store.commit([
      { type: 'del', family: 'idempotency', key },
      { type: 'del', family: 'idempotencyByExpiry', key: expiryKey(record.expiresAt, key) },
    ]);
  }

  /**
   * Up to `limit` expiry-index entries before `now`, each with the record it points at when
   * that entry is still the record's current one (else the entry is stale).
   */
  async expired(now: number, limit: number): Promise<Array<{ indexKey: string; record: IdempotencyRecord | undefined }>> {
    const rows = (await this.store.families.idempotencyByExpiry.iterator({ lt: timeKey(now), limit }).all()) as Array<[string, string]>;
    return Promise.all(
      rows.map(async ([indexKey, key]) => {
        const record = await this.store.get<IdempotencyRecord>('idempotency', key);
        const current = record && expiryKey(record.expiresAt, key) === indexKey;
        return { indexKey, record: current ? record : undefined };
      }),
    );
  }

  async dropIndexEntry(indexKey: string): Promise<void> {
    await this.store.commit([{ type: 'del', family: 'idempotencyByExpiry', key: indexKey }]);
  }
}

function recordKey(accountId: string, key: string): string {
  // Client keys are arbitrary text up to 255 chars; hashing keeps store keys short and uniform.
  return `${accountId}:${createHash('sha256').update(key).digest('hex')}`;
}

function expiryKey(expiresAt: number, key: string): string {
  return `${timeKey(expiresAt)}:${key}`;
}
