import pg from 'pg';
import { listenChannel, type ChannelListener } from './channel.ts';
import type { Family } from '../types.ts';
import { reaching, SharedStoreError } from './shared-store-error.ts';

/** A range of keys, as LevelDB takes it: bounds, direction and how many. */
export interface KeyRange {
  gt?: string;
  gte?: string;
  lt?: string;
  lte?: string;
  reverse?: boolean;
  limit?: number;
}

/** One key's final state in a write: its value, or null for a delete. */
export interface KvChange {
  family: Family;
  key: string;
  /** The value as stored (JSON text); null deletes the key. */
  value: string | null;
  /** The value the key must hold before (JSON text; null: absent); undefined: no condition. */
  expected?: string | null;
}

/** A conditional put found another value than it expected: nothing of its write was applied. */
export class KvConflictError extends Error {
  override name = 'KvConflictError';
}

/** The channel every node listens on: which keys another node's commit changed. */
export const KV_CHANNEL = 'postilion_kv';
/** Above this many bytes of keys a notification names the families only (PostgreSQL's payload limit is 8,000 bytes). */
const NOTIFY_BYTES = 7000;
/** Rows read per trip when an unbounded range is iterated. */
const PAGE_ROWS = 500;
/** How often relaxed puts (last-used times) are written, in ms. */
const RELAXED_FLUSH_MS = 1000;
const RELAXED_MAX = 10_000;

/** What a notification tells: the keys changed per family, or `null` keys: anything of the family may have changed. */
export interface Invalidation {
  node: string;
  changes: Array<{ family: Family; puts: string[]; dels: string[] } | { family: Family; all: true }>;
}

/**
 * The shared families' records in PostgreSQL, one table of (family, key, value) with keys
 * compared byte by byte (COLLATE "C"), as LevelDB compares them: the same ranges, in the same
 * order. A write is one transaction, and it notifies every node of the keys it changed. A failure
 * to reach the database rejects with SharedStoreError (reads as well as writes).
 */
export class PgKv {
  /** Relaxed puts not written yet, by `family\0key`: this node's reads see them at once. */
  private readonly relaxed = new Map<string, RelaxedPut>();
  /** Those being written now. */
  private flushing = new Map<string, RelaxedPut>();
  private relaxedTimer: NodeJS.Timeout | null = null;
  private relaxedFlush: Promise<void> | null = null;

  constructor(
    readonly pool: pg.Pool,
    /** This node's id: its own notifications are not acted on. */
    readonly nodeId: string,
    /** The table: `kv` (the shared families) or `published` (what nodes publish for reads on any node). */
    readonly table: 'kv' | 'published' = 'kv',
  ) {}

  async get(family: Family, key: string): Promise<string | undefined> {
    const { rows } = await reaching(() =>
      this.pool.query<{ value: string }>({
        name: `${this.table}-get`,
        text: `SELECT value FROM ${this.table} WHERE family = $1 AND key = $2`,
        values: [family, encodeKey(key)],
      }),
    );
    return rows[0] === undefined ? undefined : this.seen(family, key, rows[0].value);
  }

  async getMany(family: Family, keys: readonly string[]): Promise<Array<string | undefined>> {
    if (keys.length === 0) return [];
    const { rows } = await reaching(() =>
      this.pool.query<{ key: string; value: string }>({
        name: `${this.table}-get-many`,
        text: `SELECT key, value FROM ${this.table} WHERE family = $1 AND key = ANY($2::text[])`,
        values: [family, keys.map(encodeKey)],
      }),
    );
    const found = new Map(rows.map((r) => [decodeKey(r.key), r.value]));
    return keys.map((k) => {
      const stored = found.get(k);
      return stored === undefined ? undefined : this.seen(family, k, stored);
    });
  }

  /** Up to `range.limit` rows (all when absent) of the range, in key order (reversed on request). */
  async range(family: Family, range: KeyRange, limit: number): Promise<Array<[string, string]>> {
    const where: string[] = ['family = $1'];
    const values: unknown[] = [family];
    const bound = (op: string, v: string | undefined) => {
      if (v === undefined) return;
      values.push(encodeKey(v));
      where.push(`key ${op} $${values.length}`);
    };
    bound('>', range.gt);
    bound('>=', range.gte);
    bound('<', range.lt);
    bound('<=', range.lte);
    values.push(limit);
    const text = `SELECT key, value FROM ${this.table} WHERE ${where.join(' AND ')} ORDER BY key ${range.reverse ? 'DESC' : 'ASC'} LIMIT $${values.length}`;
    const { rows } = await reaching(() => this.pool.query<{ key: string; value: string }>({ text, values, rowMode: 'array' } as pg.QueryConfig));
    const page = rows as unknown as Array<[string, string]>;
    for (const row of page) row[0] = decodeKey(row[0]);
    if (this.relaxed.size + this.flushing.size > 0) for (const row of page) row[1] = this.seen(family, row[0], row[1]);
    return page;
  }

  /** Every row of the range in pages of PAGE_ROWS, each page read when the last is used up. */
  async *rows(family: Family, range: KeyRange): AsyncGenerator<[string, string]> {
    let left = range.limit === undefined || range.limit < 0 ? Infinity : range.limit;
    let current = { ...range };
    while (left > 0) {
      const page = await this.range(family, current, Math.min(PAGE_ROWS, left));
      for (const row of page) yield row;
      left -= page.length;
      if (page.length < PAGE_ROWS) return;
      const last = page.at(-1)![0];
      current = range.reverse ? { ...current, lte: undefined, lt: last } : { ...current, gte: undefined, gt: last };
    }
  }

  /** Applies the changes in one transaction and tells every node which keys changed. */
  async write(changes: readonly KvChange[]): Promise<void> {
    if (changes.length === 0) return;
    await this.transaction((client) => this.apply(client, changes));
  }

  /** The changes, in the caller's transaction on `client` (the notification goes out when it commits). */
  async apply(client: pg.ClientBase, changes: readonly KvChange[]): Promise<void> {
    if (changes.length === 0) return;
    // A write supersedes the relaxed puts of its keys not written yet (made from what was read).
    for (const c of changes) this.relaxed.delete(idOf(c.family, c.key));
    for (const c of changes) {
      if (c.expected === undefined) continue;
      const { rows } = await client.query<{ value: string }>({
        name: `${this.table}-lock`,
        text: `SELECT value FROM ${this.table} WHERE family = $1 AND key = $2 FOR UPDATE`,
        values: [c.family, encodeKey(c.key)],
      });
      // Absent and expected absent, the row is not locked: two such puts may both find it absent,
      // and the insert below refuses the second (ON CONFLICT DO NOTHING leaves it to this check).
      if ((rows[0]?.value ?? null) !== c.expected) throw new KvConflictError(`${c.family}/${c.key} changed meanwhile`);
      if (c.expected === null && c.value !== null) {
        const inserted = await client.query({
          name: `${this.table}-insert`,
          text: `INSERT INTO ${this.table} (family, key, value) VALUES ($1, $2, $3) ON CONFLICT (family, key) DO NOTHING`,
          values: [c.family, encodeKey(c.key), c.value],
        });
        if (inserted.rowCount !== 1) throw new KvConflictError(`${c.family}/${c.key} was made meanwhile`);
      }
    }
    const puts = changes.filter((c) => c.value !== null && c.expected !== null);
    const dels = changes.filter((c) => c.value === null);
    if (puts.length > 0) {
      await client.query({
        name: `${this.table}-put`,
        text:
          `INSERT INTO ${this.table} (family, key, value) SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) ` +
          'ON CONFLICT (family, key) DO UPDATE SET value = EXCLUDED.value',
        values: [puts.map((c) => c.family), puts.map((c) => encodeKey(c.key)), puts.map((c) => c.value)],
      });
    }
    if (dels.length > 0) {
      await client.query({
        name: `${this.table}-del`,
        text: `DELETE FROM ${this.table} k USING unnest($1::text[], $2::text[]) AS d(family, key) WHERE k.family = d.family AND k.key = d.key`,
        values: [dels.map((c) => c.family), dels.map((c) => encodeKey(c.key))],
      });
    }
    await this.notify(client, changes);
  }

  /** Tells the other nodes, when the transaction on `client` commits, which keys of the shared families it changed. */
  private async notify(client: pg.ClientBase, changes: readonly KvChange[]): Promise<void> {
    if (this.table !== 'kv') return;
    await client.query({ name: 'kv-notify', text: 'SELECT pg_notify($1, $2)', values: [KV_CHANNEL, JSON.stringify(this.invalidation(changes))] });
  }

  /** Deletes every key of the family. */
  async clear(family: Family): Promise<void> {
    for (const [id, c] of this.relaxed) if (c.family === family) this.relaxed.delete(id);
    await reaching(() => this.pool.query(`DELETE FROM ${this.table} WHERE family = $1`, [family]));
    await reaching(() => this.pool.query('SELECT pg_notify($1, $2)', [KV_CHANNEL, JSON.stringify({ node: this.nodeId, changes: [{ family, all: true }] })]));
  }

  /**
   * A put whose loss is harmless (last-used times): kept and written with the others about once
   * a second, the latest value of each key only; this node's reads see it at once. `over`: the
   * value it was made from (undefined: any). It changes only a record that exists and, with
   * `over`, still holds that value: a record another node changed or deleted meanwhile (an API
   * key's allow list narrowed there) is left as that node wrote it, the put lost. Resolves at once.
   */
  putRelaxed(family: Family, key: string, value: string, over?: string): void {
    const id = idOf(family, key);
    const pending = this.relaxed.get(id);
    if (!pending && this.relaxed.size >= RELAXED_MAX) return;
    // Made from the put not yet written, it replaces it over what that one was made from.
    this.relaxed.set(id, { family, key, value, over: pending && over === pending.value ? pending.over : over });
    this.relaxedTimer ??= setTimeout(() => void this.flushRelaxed(), RELAXED_FLUSH_MS);
  }

  /** Writes the relaxed puts kept so far (their loss on failure is allowed). */
  async flushRelaxed(): Promise<void> {
    if (this.relaxedTimer) clearTimeout(this.relaxedTimer);
    this.relaxedTimer = null;
    await this.relaxedFlush;
    if (this.relaxed.size === 0) return;
    this.flushing = new Map(this.relaxed);
    this.relaxed.clear();
    const changes = [...this.flushing.values()];
    this.relaxedFlush = this.transaction(async (client) => {
      await client.query({
        name: `${this.table}-update`,
        text:
          `UPDATE ${this.table} k SET value = u.value FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(family, key, value, over) ` +
          'WHERE k.family = u.family AND k.key = u.key AND (u.over IS NULL OR k.value = u.over)',
        values: [changes.map((c) => c.family), changes.map((c) => encodeKey(c.key)), changes.map((c) => c.value), changes.map((c) => c.over ?? null)],
      });
      await this.notify(client, changes);
    })
      .catch(() => undefined)
      .finally(() => {
        this.relaxedFlush = null;
        this.flushing = new Map();
      });
    await this.relaxedFlush;
  }

  /** What a read of a stored key gives: the value stored, or a relaxed put not yet written over it. */
  private seen(family: Family, key: string, stored: string): string {
    if (this.relaxed.size + this.flushing.size === 0) return stored;
    const id = idOf(family, key);
    const applies = (put: RelaxedPut | undefined, base: string): put is RelaxedPut => put !== undefined && (put.over === undefined || put.over === base);
    const writing = this.flushing.get(id);
    const base = applies(writing, stored) ? writing.value : stored;
    const next = this.relaxed.get(id);
    return applies(next, base) ? next.value : base;
  }

  /** Runs `work` in a transaction of its own. */
  private async transaction(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    const client = await reaching(() => this.pool.connect());
    let lost: Error | undefined;
    try {
      await reaching(async () => {
        await client.query('BEGIN');
        await work(client);
        await client.query('COMMIT');
      });
    } catch (err) {
      if (err instanceof SharedStoreError) lost = err;
      else await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      // A connection that failed is not given to the next caller.
      client.release(lost);
    }
  }

  /**
   * Listens to the other nodes' writes on a connection of its own: `heard` gets each of their
   * notifications, and `null` when notifications may have been missed (the connection was lost
   * and is made again): then anything may have changed. Reconnects with a back-off until closed.
   */
  listen(config: pg.ClientConfig, heard: (invalidation: Invalidation | null) => void, onError: (err: Error) => void = () => {}): ChannelListener {
    return listenChannel(
      config,
      KV_CHANNEL,
      (payload) => {
        let invalidation: Invalidation;
        try {
          invalidation = JSON.parse(payload) as Invalidation;
        } catch {
          return;
        }
        if (invalidation.node !== this.nodeId) heard(invalidation);
      },
      // What changed while no one listened is unknown: everything is read again, from the loss on and once back.
      () => heard(null),
      onError,
      () => heard(null),
    );
  }

  /** The notification of a write: its keys, or only its families when they would not fit. */
  private invalidation(changes: readonly KvChange[]): Invalidation {
    const byFamily = new Map<Family, { family: Family; puts: string[]; dels: string[] }>();
    let bytes = 0;
    for (const c of changes) {
      let entry = byFamily.get(c.family);
      if (!entry) byFamily.set(c.family, (entry = { family: c.family, puts: [], dels: [] }));
      (c.value === null ? entry.dels : entry.puts).push(c.key);
      bytes += Buffer.byteLength(c.key) + 4;
    }
    if (bytes > NOTIFY_BYTES) return { node: this.nodeId, changes: [...byFamily.keys()].map((family) => ({ family, all: true as const })) };
    return { node: this.nodeId, changes: [...byFamily.values()] };
  }
}

/**
 * A key as the table holds it. PostgreSQL's text cannot hold U+0000, which LevelDB's keys can (a
 * user's text in an index key): it is written as U+0001 U+0001, and U+0001 as U+0001 U+0002. No
 * encoded key then holds U+0000, and keys compare as their originals do (a code of one or two
 * units, each below every other character: byte order, as in LevelDB, is kept).
 */
export function encodeKey(key: string): string {
  return /[\u0000\u0001]/.test(key) ? key.replace(/[\u0000\u0001]/g, (c) => (c === '\u0000' ? '\u0001\u0001' : '\u0001\u0002')) : key;
}

export function decodeKey(stored: string): string {
  return stored.includes('\u0001') ? stored.replace(/\u0001([\u0001\u0002])/g, (_, c: string) => (c === '\u0001' ? '\u0000' : '\u0001')) : stored;
}

/** A relaxed put not written yet: its value, and the value it was made from (undefined: any). */
interface RelaxedPut {
  family: Family;
  key: string;
  value: string;
  over: string | undefined;
}

function idOf(family: Family, key: string): string {
  return `${family}\u0000${key}`;
}

/** The final state of each key a list of ops leaves, in the order of the keys' last ops. */
export function finalChanges(
  ops: ReadonlyArray<{ type: string; family: Family; key: string; value?: unknown; expected?: unknown }>,
  encode: (value: unknown) => string,
): KvChange[] {
  const last = new Map<string, KvChange>();
  for (const op of ops) {
    const id = `${op.family}\u0000${op.key}`;
    // A key's condition is that of its first op: what it must hold before this write.
    const before = last.get(id);
    const expected = before ? before.expected : op.expected === undefined ? undefined : op.expected === null ? null : encode(op.expected);
    last.delete(id);
    last.set(id, { family: op.family, key: op.key, value: op.type === 'del' ? null : encode(op.value), ...(expected !== undefined ? { expected } : {}) });
  }
  return [...last.values()];
}
