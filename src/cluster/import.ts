import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config/schema.ts';
import { MetaRepo, SCHEMA_VERSION } from '../store/meta.ts';
import type { KvChange } from '../store/pg/kv.ts';
import { Store } from '../store/store.ts';
import { SHARED_FAMILIES } from '../store/types.ts';
import { badRequest, conflict } from '../util/errors.ts';
import { clusterKeyPath, importSecrets, isClustered, openClusterDb, type ClusterDb } from './database.ts';
import { ClusterDkimKeys } from './dkim-keys.ts';
import { LIVE_MS } from './nodes.ts';

/** Records written per statement. */
const BATCH = 500;
/** A DKIM key file: keys/dkim/<domain id>/<selector>.pem. */
const DKIM_FILE = /^([A-Za-z0-9._-]{1,63})\.pem$/;

/** What `postilion cluster import` copied. snake_case: --json prints it as it is. */
export interface ImportSummary {
  data_dir: string;
  /** Records copied, by family (those with none left out). */
  records: Record<string, number>;
  total: number;
  /** The key files whose secrets the cluster now uses. */
  secrets: string[];
  dkim_keys: number;
  key_file: string;
  /** The cluster key was made by this import: it must be copied to every node. */
  key_made: boolean;
}

/**
 * `postilion cluster import`: the way from one node to several. Copies what a single node keeps
 * of the shared state in its LevelDB (SHARED_FAMILIES: accounts, keys, domains, credentials,
 * webhooks, routes, suppressions, idempotency) into an empty cluster database, with the node's
 * secrets (so that its API keys' sealed records, tracking links and VERP addresses stay valid)
 * and its DKIM private keys. The daemon must be stopped (its lock on the store says so), and no
 * node may run on the database. The records go in one transaction: a failed import leaves the
 * database empty, and can be run again.
 */
export async function importControlPlane(config: Config): Promise<ImportSummary> {
  if (!isClustered(config)) throw badRequest('cluster import copies into the cluster database: set cluster.database_url (or cluster.database_url_file) first');
  const dataDir = resolve(config.data.dir);
  if (!existsSync(join(dataDir, 'CURRENT'))) throw badRequest(`data.dir ${dataDir} holds no store: nothing to import`);
  // Opened on its own (no cluster): the records as this node wrote them. A running daemon holds the lock.
  const store = await Store.open(dataDir);
  try {
    const version = await new MetaRepo(store).schemaVersion();
    if (version !== SCHEMA_VERSION) {
      throw conflict(
        `the store in ${dataDir} has schema ${version}, this release ${SCHEMA_VERSION}: start this release on it once (it migrates the store), stop it, then import`,
      );
    }
    const keyFile = clusterKeyPath(config);
    const keyMade = !existsSync(keyFile);
    const db = await openClusterDb(config, { createKey: true });
    try {
      await refuseBusy(db);
      const secrets = await importSecrets(db, config.keys.dir);
      const dkimKeys = await importDkimKeys(db, join(resolve(config.keys.dir), 'dkim'));
      const records = await importRecords(db, store);
      return {
        data_dir: dataDir,
        records,
        total: Object.values(records).reduce((a, b) => a + b, 0),
        secrets,
        dkim_keys: dkimKeys,
        key_file: keyFile,
        key_made: keyMade,
      };
    } finally {
      await db.close();
    }
  } finally {
    await store.close();
  }
}

/** Only into an empty database that no node runs on (one would hold the secrets as they were, and would have made its own first account). */
async function refuseBusy(db: ClusterDb): Promise<void> {
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM nodes WHERE stopped_at IS NULL AND heartbeat_at > now() - make_interval(secs => $1)', [
    LIVE_MS / 1000,
  ]);
  if (rows.length > 0) throw conflict(`nodes run on the cluster database (${rows.map((r) => r.id).join(', ')}): stop them, then import`);
  await refuseFilled(db.pool);
}

async function refuseFilled(pool: Pick<ClusterDb['pool'], 'query'>): Promise<void> {
  const { rows } = await pool.query<{ filled: boolean }>('SELECT EXISTS (SELECT 1 FROM kv) AS filled');
  if (rows[0]!.filled) throw conflict('the cluster database already holds accounts and keys: import only into an empty one (a new database)');
}

/** Every record of the shared families, in one transaction, the table locked against any other writer. */
async function importRecords(db: ClusterDb, store: Store): Promise<Record<string, number>> {
  const client = await db.pool.connect();
  const counts: Record<string, number> = {};
  try {
    await client.query('BEGIN');
    await client.query('LOCK TABLE kv IN EXCLUSIVE MODE');
    await refuseFilled(client);
    for (const family of SHARED_FAMILIES) {
      let changes: KvChange[] = [];
      let count = 0;
      for await (const [key, value] of store.levels[family].iterator()) {
        changes.push({ family, key, value: JSON.stringify(value) });
        count += 1;
        if (changes.length === BATCH) {
          await db.kv.apply(client, changes);
          changes = [];
        }
      }
      await db.kv.apply(client, changes);
      if (count > 0) counts[family] = count;
    }
    await client.query('COMMIT');
    return counts;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** keys/dkim/<domain id>/<selector>.pem, each sealed into the database. */
async function importDkimKeys(db: ClusterDb, dir: string): Promise<number> {
  if (!existsSync(dir)) return 0;
  const keys = new ClusterDkimKeys(db.pool, db.key);
  let count = 0;
  for (const domain of readdirSync(dir, { withFileTypes: true })) {
    if (!domain.isDirectory()) continue;
    for (const file of readdirSync(join(dir, domain.name))) {
      const selector = DKIM_FILE.exec(file)?.[1];
      if (!selector) continue;
      await keys.write(domain.name, selector, readFileSync(join(dir, domain.name, file), 'utf8'));
      count += 1;
    }
  }
  return count;
}
