import { mkdirSync } from 'node:fs';
import { Level } from 'level';
import type { AbstractSublevel } from 'abstract-level';
import { GroupCommitter, type WriteOp } from './group-commit.ts';

/** The families of records, one sublevel each. Only store/ knows their keys. */
export const FAMILIES = [
  'meta',
  'accounts',
  'users',
  'usersByEmail',
  'members',
  'apiKeys',
  'apiKeysByHash',
  'idempotency',
  'idempotencyByExpiry',
  'domains',
  'domainsByName',
  'domainsByAccount',
  'events',
  'eventsByAccount',
  'messages',
  'messageIndex',
  'messageExpiry',
  'bodies',
  'bodyRefs',
  'schedule',
] as const;
/** Families whose values are raw bytes (message bodies); the others hold JSON. */
const BINARY: ReadonlySet<Family> = new Set<Family>(['bodies']);
export type Family = (typeof FAMILIES)[number];

type Db = Level<string, unknown>;
export type Sublevel = AbstractSublevel<Db, string | Buffer | Uint8Array, string, unknown>;

export class StoreLockedError extends Error {
  override name = 'StoreLockedError';
}

export class Store {
  private constructor(
    private readonly db: Db,
    readonly families: Record<Family, Sublevel>,
    private readonly committer: GroupCommitter,
    readonly dir: string,
  ) {}

  /** Opens (creating if needed) the store; fails clearly when another process holds it. */
  static async open(dir: string): Promise<Store> {
    mkdirSync(dir, { recursive: true });
    const db: Db = new Level<string, unknown>(dir, { valueEncoding: 'json' });
    try {
      await db.open();
    } catch (err) {
      if (isLockError(err)) {
        throw new StoreLockedError(
          `data directory ${dir} is in use by another process (is a postilion daemon already running on it?)`,
        );
      }
      throw err;
    }
    const families = Object.fromEntries(
      FAMILIES.map((name) => [name, db.sublevel<string, unknown>(name, { valueEncoding: BINARY.has(name) ? 'buffer' : 'json' })]),
    ) as Record<Family, Sublevel>;
    const committer = new GroupCommitter((ops) =>
      db.batch(
        ops.map((op) =>
          op.type === 'put'
            ? { type: 'put' as const, sublevel: families[op.family], key: op.key, value: op.value }
            : { type: 'del' as const, sublevel: families[op.family], key: op.key },
        ),
        { sync: true },
      ),
    );
    return new Store(db, families, committer, dir);
  }

  /** Durably applies all ops atomically; resolves only once they are synced to disk. */
  commit(ops: WriteOp[]): Promise<void> {
    return this.committer.submit(ops);
  }

  /** A write whose loss in a crash is harmless (e.g. last-used timestamps): no fsync wait. */
  async putRelaxed(family: Family, key: string, value: unknown): Promise<void> {
    await this.families[family].put(key, value);
  }

  async get<T>(family: Family, key: string): Promise<T | undefined> {
    return (await this.families[family].get(key)) as T | undefined;
  }

  get commitStats(): { batches: number; writes: number } {
    return this.committer.stats;
  }

  async close(): Promise<void> {
    await this.committer.drain();
    await this.db.close();
  }
}

function isLockError(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = (e as Error & { cause?: unknown }).cause) {
    const code = (e as Error & { code?: string }).code;
    if (code === 'LEVEL_LOCKED' || /lock/i.test(e.message)) return true;
  }
  return false;
}
