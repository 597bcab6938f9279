import { mkdirSync } from 'node:fs';
import { Level } from 'level';
import type { AbstractSublevel } from 'abstract-level';
import { GroupCommitter } from './group-commit.ts';
import { ReadCache, type CacheLimits } from './read-cache.ts';
import { FAMILIES, type Family, type WriteOp } from './types.ts';
import { PgFamily, type FamilyApi } from './pg/family.ts';
import { finalChanges, KvConflictError, type Invalidation, type PgKv } from './pg/kv.ts';
import { SharedStoreError } from './pg/shared-store-error.ts';
import type { Emitter } from '../util/signals.ts';

export { SharedStoreError };

/**
 * Families kept in memory after the first read (see ReadCache), with how many records of each at
 * most. This process is the only one with the store open.
 */
const CACHED: CacheLimits = new Map<Family, number>([
  // Read on (nearly) every request — authentication and the sender domain — and written rarely.
  ['accounts', 50_000],
  ['apiKeys', 50_000],
  ['apiKeysByHash', 50_000],
  ['domains', 50_000],
  ['domainsByName', 50_000],
  // Read on every SMTP AUTH and MAIL FROM.
  ['smtpCredentials', 50_000],
  ['smtpCredentialsByUsername', 50_000],
  // Read for every stored event by the webhook fan-out.
  ['webhooks', 50_000],
  // Read three times per delivery (taken, checked under its lock, its outcome) and then written,
  // which drops it: what stays are mostly the records in the queue's memory (delivery.ready_limit,
  // 2,000 by default; a larger limit gets fewer hits). Lists read around it (MessagesRepo).
  ['messages', 5_000],
]);
const WRITE_BUFFER_BYTES = 32 * 1024 * 1024;
/** LevelDB's open (and so mapped) files: 54 tables of 2 MB and its own files (see Store.open). */
const MAX_OPEN_FILES = 64;
/** What the store tells (given at open): every synced batch (for metrics) and every failed batch write (the storage guard). */
export interface StoreSignals {
  'store.committed': { seconds: number; operations: number; writers: number };
  'store.write-failed': unknown;
  /** Cluster mode: another node's change to shared records was heard (null: anything may have changed). */
  'store.heard': Invalidation | null;
}

/** Families whose values are raw bytes (message bodies); the others hold JSON. */
const BINARY: ReadonlySet<Family> = new Set<Family>(['bodies']);

type Db = Level<string, unknown>;
export type Sublevel = AbstractSublevel<Db, string | Buffer | Uint8Array, string, unknown>;

export class StoreLockedError extends Error {
  override name = 'StoreLockedError';
}

/** A put op, as a journal adds one to a batch. */
export type PutOp = Extract<WriteOp, { type: 'put' }>;

/**
 * What a batch writes about itself, in that same synced batch: the statistics counters' log
 * (store/counters-repo.ts). Handed to Store.open, so that the store writes it without importing it.
 */
export interface BatchJournal {
  /** The store is open and has taken no write yet: the journal reads back what it logged before. */
  opened(store: Store): Promise<void>;
  /** The put this batch adds (null: none), made as the batch is written. */
  entry(ops: readonly WriteOp[]): PutOp | null;
  /** The batch that held `entry` is on disk. */
  landed(entry: PutOp): void;
  /** The store closes, its queued batches landed: the journal's last writes go in now. */
  close(): Promise<void>;
}

/**
 * Cluster mode (DESIGN.md §10): these families are kept in the cluster's PostgreSQL, the others
 * in this node's LevelDB.
 */
export interface SharedFamilies {
  kv: PgKv;
  families: ReadonlySet<Family>;
  /** Called last by Store.close: the connections to the shared database end with the store. */
  close(): Promise<void>;
}

/** A conditional put (WriteOp `expected`) found the key changed by another writer: nothing of the commit was written. */
export class WriteConflictError extends Error {
  override name = 'WriteConflictError';
}

/**
 * What a repository reads and writes through: the store, or a read-only view of it (in cluster
 * mode, the records every node published: cluster/published-view.ts).
 */
export type StoreAccess = Pick<Store, 'families' | 'get' | 'getMany' | 'commit' | 'onPut'>;

export class Store {
  private readonly cache = new ReadCache(CACHED);
  private readonly putListeners = new Map<Family, Array<(key: string, value: unknown) => void>>();
  private readonly remoteListeners = new Map<Family, Array<(key: string | null) => void>>();
  private closing = false;
  /** Every family, as features read it: LevelDB sublevels, and in cluster mode PostgreSQL for the shared ones. */
  readonly families: Record<Family, FamilyApi>;

  private constructor(
    private readonly db: Db,
    /** The LevelDB sublevel of each family (in cluster mode the shared ones hold nothing). */
    readonly levels: Record<Family, Sublevel>,
    private readonly committer: GroupCommitter,
    readonly dir: string,
    private readonly journal: BatchJournal | null,
    private readonly health: WriteHealth,
    private readonly shared: SharedFamilies | null,
  ) {
    this.families = shared
      ? (Object.fromEntries(FAMILIES.map((name) => [name, shared.families.has(name) ? new PgFamily(shared.kv, name) : levels[name]])) as unknown as Record<
          Family,
          FamilyApi
        >)
      : levels;
  }

  /** Whether the family is kept in the shared database (cluster mode). */
  isShared(family: Family): boolean {
    return this.shared?.families.has(family) === true;
  }

  /** The families this node keeps in its LevelDB. */
  get localFamilies(): FamilyApi[] {
    return FAMILIES.filter((f) => !this.isShared(f)).map((f) => this.levels[f]);
  }

  /**
   * Opens (creating if needed) the store; fails clearly when another process holds it.
   * `journal`: the statistics counters (store/counters-repo.ts), written with every batch that
   * holds `add` or `count` ops; a store opened without them (a tool) refuses such ops, and leaves
   * the counters' log on disk as it is.
   */
  static async open(dir: string, options: { journal?: BatchJournal; signals?: Emitter<StoreSignals>; shared?: SharedFamilies } = {}): Promise<Store> {
    mkdirSync(dir, { recursive: true });
    // LevelDB's 4 MB write buffer dates from small machines. Each accepted message writes its body,
    // record, index entries and event, and its outcome rewrites the record: with 4 MB memtables
    // that was a flush every few hundred messages and a level-0 compaction every few flushes.
    // 32 MB (RocksDB's default is 64) took about a fifth off the CPU per message relayed in
    // bench:smtp-relay; the cost is memory (two memtables at most) and a longer log replay after
    // a crash.
    // LevelDB maps every table file it holds open, up to its 1,000 open files: read pages of a
    // large store (a million jobs waiting is 600 MB of tables) stayed resident, some 270 MB of
    // the daemon's memory. MAX_OPEN_FILES bounds the mapped tables (LevelDB keeps ten of them
    // for its own files) to about 110 MB; a table evicted is unmapped, and opened again if read.
    const db: Db = new Level<string, unknown>(dir, { valueEncoding: 'json', writeBufferSize: WRITE_BUFFER_BYTES, maxOpenFiles: MAX_OPEN_FILES });
    try {
      await db.open();
    } catch (err) {
      if (isLockError(err)) {
        throw new StoreLockedError(`data directory ${dir} is in use by another process (is a postilion daemon already running on it?)`);
      }
      throw err;
    }
    const families = Object.fromEntries(
      FAMILIES.map((name) => [name, db.sublevel<string, unknown>(name, { valueEncoding: BINARY.has(name) ? 'buffer' : 'json' })]),
    ) as Record<Family, Sublevel>;
    const prefixes = Object.fromEntries(FAMILIES.map((name) => [name, families[name].prefix])) as Record<Family, string>;
    // Keys and values are encoded here and handed to classic-level's own batch: abstract-level's
    // public batch clones, checks and re-encodes every operation, which cost more per accept than
    // the write itself. Only this committer writes, and close() drains it before the db closes.
    const raw = db as unknown as RawBatch;
    const journal = options.journal ?? null;
    const health = new WriteHealth();
    const committer = new GroupCommitter(async (ops) => {
      // A reopen after a failed write (Store.recover) finishes before the next batch.
      if (health.reopening) await health.reopening;
      const encoded: RawOp[] = [];
      const superseded = supersededPuts(ops);
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i]!;
        const key = prefixes[op.family] + op.key;
        if (op.type === 'del') encoded.push({ type: 'del', key });
        else if (op.type === 'put' && !superseded?.has(i)) encoded.push({ type: 'put', key, value: encodeValue(op) });
      }
      // The batch's adds and counts, summed, as one row of the counters' log (store/counter-log.ts).
      const entry = journal === null ? null : journal.entry(ops);
      if (entry) encoded.push({ type: 'put', key: prefixes[entry.family] + entry.key, value: encodeValue(entry) });
      try {
        const fault = health.faultFor(ops);
        if (fault) throw fault;
        // A reopen that failed left the database closed; the raw batch must not reach it.
        if (db.status !== 'open') throw new Error(`the database is ${db.status} (a reopen after a failed write did not succeed yet)`);
        health.writing = raw._batch(encoded, SYNC);
        await health.writing;
      } catch (err) {
        health.failed(err);
        throw new StoreWriteError(err);
      } finally {
        health.writing = null;
      }
      if (entry) journal!.landed(entry);
    });
    const { signals } = options;
    if (signals) {
      committer.observer = (seconds, operations, writers) => signals.emit('store.committed', { seconds, operations, writers });
      health.onError = (err) => signals.emit('store.write-failed', err);
    }
    const store = new Store(db, families, committer, dir, journal, health, options.shared ?? null);
    await journal?.opened(store);
    return store;
  }

  /** Durably applies all ops atomically; resolves only once they are synced to disk. */
  commit(ops: WriteOp[]): Promise<void> {
    // classic-level's raw batch does not check that the database is open: a write after close must not reach it.
    if (this.closing) return Promise.reject(new StoreClosedError());
    for (const op of ops) {
      if (op.type === 'put') {
        // Cluster mode: made in commitSplit, as the local batch is handed over (after the shared write).
        if (op.keyAtCommit && !this.shared) op.key = op.keyAtCommit();
      } else if (op.type !== 'del' && this.journal === null) {
        return Promise.reject(new TypeError(`a ${op.type} op needs the store opened with the counters (store/counters-repo.ts)`));
      }
    }
    const written = this.shared ? this.commitSplit(ops, this.shared) : this.cache.writing(ops, () => this.committer.submit(ops));
    if (this.putListeners.size === 0) return written;
    return written.then(() => this.landed(ops));
  }

  /**
   * Cluster mode: the ops of shared families go to PostgreSQL in one transaction, then the others
   * to LevelDB in one batch. A commit that holds both is not atomic across the two: a crash (or a
   * local write failure) between them keeps the shared change without the local one.
   */
  private async commitSplit(ops: WriteOp[], shared: SharedFamilies): Promise<void> {
    const remote: WriteOp[] = [];
    const local: WriteOp[] = [];
    for (const op of ops) (shared.families.has(op.family) ? remote : local).push(op);
    if (remote.length > 0) {
      const changes = finalChanges(remote, (value) => {
        const json = JSON.stringify(value);
        // As LevelDB's batch refuses it (encodeValue): nothing of the commit is written.
        if (typeof json !== 'string') throw new TypeError(`cannot store ${typeof value} in a shared family`);
        return json;
      });
      await this.cache.writing(remote, async () => {
        try {
          await shared.kv.write(changes);
        } catch (err) {
          if (err instanceof KvConflictError) throw new WriteConflictError(err.message);
          throw err instanceof SharedStoreError ? err : new SharedStoreError(err);
        }
      });
    }
    if (local.length > 0) {
      // Keys made at commit (event ids) are made as the batch is handed to the committer, not
      // before the shared write: a commit that waited on PostgreSQL would otherwise land after
      // commits with later ids, and a consumer reading on from its cursor would pass its events by.
      for (const op of local) if (op.type === 'put' && op.keyAtCommit) op.key = op.keyAtCommit();
      await this.cache.writing(local, () => this.committer.submit(local));
    }
  }

  /**
   * Another node changed shared keys (null: anything may have changed, notifications were
   * missed): cached records go, and the family's change listeners hear of each key (null: all).
   */
  heard(invalidation: Invalidation | null): void {
    const families = this.shared ? [...this.shared.families] : [];
    const changes = invalidation?.changes ?? families.map((family) => ({ family, all: true as const }));
    for (const change of changes) {
      const all = 'all' in change;
      this.cache.invalidate(change.family, all ? null : [...change.puts, ...change.dels]);
      const listeners = this.remoteListeners.get(change.family);
      if (!listeners) continue;
      for (const listener of listeners) {
        try {
          if (all) listener(null);
          else for (const key of [...change.puts, ...change.dels]) listener(key);
        } catch (err) {
          process.emitWarning(`a listener of ${change.family} changes failed: ${(err as Error).message}`);
        }
      }
    }
  }

  /** Calls `listener` with each key of `family` that another node put or deleted (null: any key may have changed). */
  onRemoteChange(family: Family, listener: (key: string | null) => void): void {
    const listeners = this.remoteListeners.get(family) ?? [];
    listeners.push(listener);
    this.remoteListeners.set(family, listeners);
  }

  /** Tells the put listeners of a landed batch; what they do cannot fail the commit. */
  private landed(ops: WriteOp[]): void {
    for (const op of ops) {
      if (op.type !== 'put') continue;
      for (const listener of this.putListeners.get(op.family) ?? []) {
        try {
          listener(op.key, op.value);
        } catch (err) {
          process.emitWarning(`a listener of ${op.family} writes failed: ${(err as Error).message}`);
        }
      }
    }
  }

  /** Calls `listener` (which must not throw) with the key and value of every put into `family`, once its commit has landed. */
  onPut(family: Family, listener: (key: string, value: unknown) => void): void {
    const listeners = this.putListeners.get(family) ?? [];
    listeners.push(listener);
    this.putListeners.set(family, listeners);
  }

  /**
   * A write whose loss in a crash is harmless (e.g. last-used timestamps): no fsync wait.
   * `over`: the record it was made from; in cluster mode it is lost if another node changed the
   * record meanwhile (one node's callers hold their own locks).
   */
  async putRelaxed(family: Family, key: string, value: unknown, over?: unknown): Promise<void> {
    if (this.shared?.families.has(family)) {
      const kv = this.shared.kv;
      const base = over === undefined ? undefined : JSON.stringify(over);
      await this.cache.writing([{ family, key }], async () => kv.putRelaxed(family, key, JSON.stringify(value), base));
      if (this.putListeners.size > 0) this.landed([{ type: 'put', family, key, value }]);
      return;
    }
    try {
      await this.cache.writing([{ family, key }], () => this.levels[family].put(key, value));
    } catch (err) {
      if (this.closing) throw err;
      this.health.failed(err);
      throw new StoreWriteError(err);
    }
    // Put listeners hear of every put, however it was written.
    if (this.putListeners.size > 0) this.landed([{ type: 'put', family, key, value }]);
  }

  async get<T>(family: Family, key: string): Promise<T | undefined> {
    const read = async () => (await this.families[family].get(key)) as T | undefined;
    return this.cache.caches(family) ? this.cache.get(family, key, read) : read();
  }

  /**
   * Several records of one family in one read: one trip to LevelDB's thread pool for all of
   * them, where a read each costs a trip each (a queued work item, a wake-up of the pool and of
   * the loop, a promise): what the engine takes in batches of due jobs reads this way.
   */
  async getMany<T>(family: Family, keys: readonly string[]): Promise<Array<T | undefined>> {
    if (keys.length === 0) return [];
    const readMany = async (unkept: string[]) => (await this.families[family].getMany(unkept)) as Array<T | undefined>;
    return this.cache.caches(family) ? this.cache.getMany<T>(family, keys, readMany) : readMany(keys as string[]);
  }

  /** Resolves once every batch committed so far has landed (or failed). */
  drain(): Promise<void> {
    return this.committer.drain();
  }

  /**
   * Every record as it stands now, for a consistent copy (a backup): a LevelDB snapshot, taken
   * before this returns, so writes that land later are not seen. Its raw keys and values come
   * in key order, in chunks; close it when done (a snapshot keeps old versions alive).
   */
  snapshot(): StoreSnapshot {
    const snapshot = this.db.snapshot();
    const db = this.db;
    return {
      async *entries(chunk = 256) {
        const it = db.iterator<Buffer, Buffer>({ snapshot, keyEncoding: 'buffer', valueEncoding: 'buffer' });
        try {
          for (;;) {
            const batch = await it.nextv(chunk);
            if (batch.length === 0) return;
            yield batch;
          }
        } finally {
          await it.close();
        }
      },
      close: () => snapshot.close(),
    };
  }

  /** Whether the database is open (the daemon's readiness). */
  get isOpen(): boolean {
    return (this.db as { status?: string }).status === 'open';
  }

  get commitStats(): { batches: number; writes: number } {
    return this.committer.stats;
  }

  /**
   * Tests: `fault` is asked before every batch is written; an error it returns fails the batch
   * as a failed LevelDB write would (null: no fault). `sticky`: as LevelDB does, once a write
   * failed every later one fails too, until the database is reopened (Store.recover).
   */
  injectFault(fault: ((ops: readonly WriteOp[]) => Error | null) | null, options: { sticky?: boolean } = {}): void {
    this.health.fault = fault;
    this.health.sticky = options.sticky === true;
    this.health.stuck = null;
  }

  /** Whether a batch write failed since the store was opened or last recovered. */
  get writeFailed(): boolean {
    return this.health.error !== null;
  }

  /**
   * Makes the store take writes again after a failed one: LevelDB keeps a failed background
   * write as its state and refuses every later write, so the database is closed and opened again
   * (what was synced before is on disk; the log is replayed). Then a synced probe write proves
   * that writes land; rejects when it does not. Batches wait meanwhile.
   */
  async recover(): Promise<void> {
    if (this.closing) throw new StoreClosedError();
    if (this.health.reopening) return this.health.reopening;
    const done = (async () => {
      // The batch being written lands or fails first; the next ones wait for this.
      await this.health.writing?.catch(() => undefined);
      try {
        await this.probe();
      } catch (err) {
        // A fault a test injected that LevelDB would not keep: there is nothing to reopen.
        if (err === this.health.injected && this.health.stuck === null && this.db.status === 'open') throw err;
        await this.reopen();
        await this.probe();
      }
      this.health.error = null;
    })();
    this.health.reopening = done;
    try {
      await done;
    } finally {
      this.health.reopening = null;
    }
  }

  /** One small synced write: whether writes land now. */
  private async probe(): Promise<void> {
    const probe: RawOp = { type: 'put', key: this.levels.meta.prefix + 'storage-probe', value: JSON.stringify(new Date().toISOString()) };
    try {
      const fault = this.health.faultFor([]);
      if (fault) throw fault;
      if (this.db.status !== 'open') throw new Error(`the database is ${this.db.status}`);
      await (this.db as unknown as RawBatch)._batch([probe], SYNC);
    } catch (err) {
      this.health.error = err;
      throw err;
    }
  }

  /**
   * Closes the database and opens it again, which clears LevelDB's kept error. Reads that come
   * while it opens wait for it; only those during the close itself are refused.
   */
  private async reopen(): Promise<void> {
    if (this.db.status === 'open') await this.db.close();
    const opened = this.db.open();
    // Sublevels close with their database and do not open again with it; opening now, they
    // defer reads until the database is open.
    const families = Object.values(this.levels).map((family) => family.open());
    // An open can fail too (no room for a new log): every promise is settled, none left unhandled,
    // and the next recovery (the guard's back-off) opens it again; reads answer "reopening" meanwhile.
    const settled = await Promise.allSettled([opened, ...families]);
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    this.health.stuck = null;
  }

  /** Stops taking writes (they are refused with StoreClosedError), lets the queued ones land, closes. */
  async close(): Promise<void> {
    // What the counters' log holds goes into the counter rows before the last batch.
    await this.committer.drain();
    await this.journal?.close();
    await this.shared?.kv.flushRelaxed();
    this.closing = true;
    await this.committer.drain();
    await this.health.reopening?.catch(() => undefined);
    if (this.db.status === 'open') await this.db.close();
    await this.shared?.close();
  }
}

/** Store.snapshot(): the raw records of one instant. */
export interface StoreSnapshot {
  entries(chunk?: number): AsyncGenerator<Array<[Buffer, Buffer]>>;
  close(): Promise<void>;
}

/** A write after the store began to close (shutdown): nothing was written. */
export class StoreClosedError extends Error {
  constructor() {
    super('the store is closed');
    this.name = 'StoreClosedError';
  }
}

/** How the store's writes fare: the last error, the storage guard's ear, a test's fault. */
class WriteHealth {
  error: unknown = null;
  onError: ((err: unknown) => void) | null = null;
  fault: ((ops: readonly WriteOp[]) => Error | null) | null = null;
  sticky = false;
  /** A sticky fault's error, kept until the database is reopened. */
  stuck: Error | null = null;
  /** The last error a fault gave. */
  injected: Error | null = null;
  reopening: Promise<void> | null = null;
  /** The batch on its way to disk. */
  writing: Promise<void> | null = null;

  /** The error an injected fault fails this batch with (null: none, the batch is written). */
  faultFor(ops: readonly WriteOp[]): Error | null {
    if (this.fault === null) return null;
    const err = this.stuck ?? this.fault(ops);
    if (err !== null) {
      this.injected = err;
      if (this.sticky) this.stuck = err;
    }
    return err;
  }

  failed(err: unknown): void {
    this.error = err;
    this.onError?.(err);
  }
}

/**
 * A batch that LevelDB (or the filesystem under it) did not take: nothing of it was written.
 * Ingress answers it as a lack of storage (HTTP 507, SMTP 452 4.3.1).
 */
export class StoreWriteError extends Error {
  override name = 'StoreWriteError';
  constructor(cause: unknown) {
    super(`the store could not write: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

type RawOp = { type: 'put'; key: string; value: string | Buffer } | { type: 'del'; key: string };
/** classic-level's implementation of batch: encoded keys and values, no per-operation checks. */
interface RawBatch {
  _batch(ops: RawOp[], options: { sync: boolean }): Promise<void>;
}
const SYNC = { sync: true };

/** The positions of `latest` puts that a later `latest` put of the same key in the batch supersedes (null: none). */
function supersededPuts(ops: readonly WriteOp[]): Set<number> | null {
  let last: Map<string, number> | null = null;
  let superseded: Set<number> | null = null;
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!;
    if (op.type !== 'put' || op.latest !== true) continue;
    const id = `${op.family}\u0000${op.key}`;
    last ??= new Map();
    const before = last.get(id);
    if (before !== undefined) (superseded ??= new Set()).add(before);
    last.set(id, i);
  }
  return superseded;
}

/** The last string value encoded: a message's index and expiry entries all hold its id. */
let lastString: string | undefined;
let lastStringJson = '';

function encodeValue(op: PutOp): string | Buffer {
  if (typeof op.value === 'string' && !BINARY.has(op.family)) {
    if (op.value !== lastString) {
      lastStringJson = JSON.stringify(op.value);
      lastString = op.value;
    }
    return lastStringJson;
  }
  const value = BINARY.has(op.family) ? op.value : JSON.stringify(op.value);
  if (typeof value !== 'string' && !Buffer.isBuffer(value)) {
    throw new TypeError(`cannot store ${typeof op.value} under ${op.family}/${op.key}`);
  }
  return value;
}

function isLockError(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = (e as Error & { cause?: unknown }).cause) {
    const code = (e as Error & { code?: string }).code;
    if (code === 'LEVEL_LOCKED' || /lock/i.test(e.message)) return true;
  }
  return false;
}
