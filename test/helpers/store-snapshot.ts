import type { ClusterDb } from '../../src/cluster/database.ts';
import type { CountersRepo } from '../../src/store/counters-repo.ts';
import type { Store } from '../../src/store/store.ts';
import type { Family } from '../../src/store/types.ts';

/** Every raw entry of an open store: `<sublevel prefix><key>` → value bytes. */
export type StoreSnapshot = Map<string, Buffer>;

/**
 * Reads the whole LevelDB of an open store, every family and anything outside them, through the
 * root database the families are sublevels of (values as raw bytes: what is on disk), its
 * counters' log folded first. In cluster mode the shared families' rows in PostgreSQL too, under
 * the keys they would have in LevelDB (their family's sublevel prefix, their value's JSON text).
 * `normalize` may rewrite an entry's bytes before they are kept, to leave out a field that
 * changes legitimately.
 */
export async function snapshotStore(
  { store, counters, cluster }: { store: Store; counters: CountersRepo; cluster?: ClusterDb | null },
  normalize?: (key: string, value: Buffer) => Buffer,
): Promise<StoreSnapshot> {
  // The counters' log is folded in the background about once a second: folded first, what a
  // snapshot shows no longer moves on its own (a later one differs only by what was written since).
  await counters.fold();
  const root = store.levels.meta.db;
  const entries: StoreSnapshot = new Map();
  // Large nextv() reads: several times cheaper than next() or all() (measured: 0.3 ms against 2 ms
  // for 800 entries), which matters when a test takes a snapshot per request.
  const iterator = root.iterator<string, Buffer>({ keyEncoding: 'utf8', valueEncoding: 'buffer' });
  try {
    for (;;) {
      const batch = await iterator.nextv(10_000);
      if (batch.length === 0) break;
      for (const [key, value] of batch) entries.set(key, normalize ? normalize(key, value) : value);
    }
  } finally {
    await iterator.close();
  }
  if (cluster) {
    const { rows } = await cluster.pool.query<{ family: Family; key: string; value: string }>('SELECT family, key, value FROM kv ORDER BY family, key');
    for (const { family, key, value } of rows) {
      const raw = store.levels[family].prefix + key;
      entries.set(raw, normalize ? normalize(raw, Buffer.from(value)) : Buffer.from(value));
    }
  }
  return entries;
}

/** What changed from `before` to `after`: one line per added, removed or changed entry. */
export function diffSnapshots(before: StoreSnapshot, after: StoreSnapshot): string[] {
  const changes: string[] = [];
  for (const [key, value] of after) {
    const old = before.get(key);
    if (old === undefined) changes.push(`added ${key}`);
    else if (!old.equals(value)) changes.push(`changed ${key}`);
  }
  for (const key of before.keys()) if (!after.has(key)) changes.push(`removed ${key}`);
  return changes;
}

/**
 * A normalizer that drops `field` from the JSON values of the families whose sublevel prefix is
 * given (e.g. `!apiKeys!`, `store.levels.apiKeys.prefix`).
 */
export function withoutField(prefix: string, field: string): (key: string, value: Buffer) => Buffer {
  // Parsing is most of a snapshot's cost: an entry whose bytes did not change keeps its result.
  const last = new Map<string, { raw: Buffer; normalized: Buffer }>();
  return (key, value) => {
    if (!key.startsWith(prefix)) return value;
    const known = last.get(key);
    if (known?.raw.equals(value)) return known.normalized;
    const record = JSON.parse(value.toString('utf8')) as Record<string, unknown>;
    delete record[field];
    const normalized = Buffer.from(JSON.stringify(record));
    last.set(key, { raw: value, normalized });
    return normalized;
  };
}
