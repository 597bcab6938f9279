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

  /** Writes the record durably, moving its expiry index entry from `previous` if there was one. */
  async save(record: IdempotencyRecord, previous?: IdempotencyRecord): Promise<void> {
    const key = recordKey(record.accountId, record.key);
    const ops: WriteOp[] = [];
    if (previous) ops.push({ type: 'del', family: 'idempotencyByExpiry', key: expiryKey(previous.expiresAt, key) });
    ops.push(
      { type: 'put', family: 'idempotency', key, value: record },
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

  /** Deletes records whose expiry is before `now`, in bounded batches. Returns how many. */
  async purgeExpired(now: number, batchSize = 500): Promise<number> {
    let purged = 0;
    for (;;) {
      const rows = (await this.store.families.idempotencyByExpiry
        .iterator({ lt: timeKey(now), limit: batchSize })
        .all()) as Array<[string, string]>;
      if (rows.length === 0) return purged;
      const ops: WriteOp[] = [];
      for (const [indexKey, key] of rows) {
        ops.push({ type: 'del', family: 'idempotencyByExpiry', key: indexKey });
        const current = await this.store.get<IdempotencyRecord>('idempotency', key);
        // Only remove the record if this index entry is its current one.
        if (current && expiryKey(current.expiresAt, key) === indexKey) {
          ops.push({ type: 'del', family: 'idempotency', key });
        }
      }
      await this.store.commit(ops);
      purged += rows.length;
    }
  }
}

function recordKey(accountId: string, key: string): string {
  // Client keys are arbitrary text up to 255 chars; hashing keeps store keys short and uniform.
  return `${accountId}:${createHash('sha256').update(key).digest('hex')}`;
}

function expiryKey(expiresAt: number, key: string): string {
  return `${timeKey(expiresAt)}:${key}`;
}
