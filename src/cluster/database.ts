import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import type { Config } from '../config/schema.ts';
import { PgKv } from '../store/pg/kv.ts';
import { SecretBox } from '../util/secret-box.ts';
import { CLUSTER_SCHEMA_VERSION, MIGRATIONS } from './migrations.ts';

/** A cluster setting that cannot work (a missing key file, a database newer than this release): the start is refused with this text. */
export class ClusterError extends Error {
  override name = 'ClusterError';
}

/** The secrets every node must share (each a 32-byte key), by the name of the file a single node keeps it in under keys.dir. */
export const CLUSTER_SECRETS = ['secret-box.key', 'tracking.key', 'webhook-secrets.key', 'route-secrets.key', 'verp.key'] as const;
export type ClusterSecretName = (typeof CLUSTER_SECRETS)[number];

/** The advisory lock the migrations run under (one node migrates, the others wait). */
const MIGRATION_LOCK = 7_302_145_001;
/** What the cluster key seals to prove it is the cluster's (a node with another key is refused). */
const KEY_CHECK = 'cluster-key-check';

/** The cluster's database as a node uses it: the pool, the shared and published records, the sealed secrets. */
export interface ClusterDb {
  pool: pg.Pool;
  nodeId: string;
  /** How to open a connection of one's own (LISTEN). */
  connection: pg.ClientConfig;
  /** The shared families (store/). */
  kv: PgKv;
  /** What the nodes publish for reads on any node. */
  published: PgKv;
  /** The cluster key: seals the secrets and DKIM keys in the database. */
  key: SecretBox;
  /** The cluster's secrets, read (or made by the first node) at open. */
  secrets: ReadonlyMap<ClusterSecretName, Buffer>;
  close(): Promise<void>;
}

/** Whether the configuration puts this node in a cluster. */
export function isClustered(config: Config): boolean {
  return config.cluster.database_url !== '' || config.cluster.database_url_file !== '';
}

/** The database URL, from the configuration or its file. */
export function clusterUrl(config: Config): string {
  if (config.cluster.database_url !== '') return config.cluster.database_url;
  const file = resolve(config.cluster.database_url_file);
  let url: string;
  try {
    url = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new ClusterError(`cluster.database_url_file ${file} cannot be read: ${(err as Error).message}`);
  }
  if (!/^postgres(ql)?:\/\//.test(url)) throw new ClusterError(`cluster.database_url_file ${file} does not hold a postgres:// URL`);
  return url;
}

export function clusterNodeId(config: Config): string {
  return config.cluster.node_id !== ''
    ? config.cluster.node_id
    : hostname()
        .replace(/[^A-Za-z0-9._-]/g, '-')
        .slice(0, 63) || 'node';
}

export function clusterKeyPath(config: Config): string {
  return resolve(config.cluster.key_file !== '' ? config.cluster.key_file : join(config.keys.dir, 'cluster.key'));
}

/**
 * Connects to the cluster's database: brings its schema up to date (or refuses one newer than
 * this release), checks the cluster key against it, and reads the cluster's secrets (the first
 * node makes them). The node's heartbeat and the caches' invalidation start elsewhere.
 */
export async function openClusterDb(config: Config, options: { createKey?: boolean } = {}): Promise<ClusterDb> {
  const nodeId = clusterNodeId(config);
  const connection: pg.ClientConfig = {
    connectionString: clusterUrl(config),
    application_name: `postilion ${nodeId}`.slice(0, 63),
    connectionTimeoutMillis: 10_000,
  };
  const pool = new pg.Pool({ ...connection, max: config.cluster.pool_size, idleTimeoutMillis: 30_000 });
  // An idle connection that breaks is dropped by the pool; the next query opens another.
  pool.on('error', () => undefined);
  try {
    await migrateCluster(pool);
    const key = await clusterKey(pool, clusterKeyPath(config), options.createKey === true);
    const secrets = await loadSecrets(pool, key);
    return {
      pool,
      nodeId,
      connection,
      kv: new PgKv(pool, nodeId, 'kv'),
      published: new PgKv(pool, nodeId, 'published'),
      key,
      secrets,
      close: () => pool.end(),
    };
  } catch (err) {
    await pool.end().catch(() => undefined);
    if (err instanceof ClusterError) throw err;
    throw new ClusterError(`the cluster database cannot be used: ${(err as Error).message}`);
  }
}

/** Applies the missing schema steps under an advisory lock; refuses a database newer than this release. */
export async function migrateCluster(pool: pg.Pool): Promise<string[]> {
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      const { rows } = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations');
      const found = rows[0]?.v ?? 0;
      if (found > CLUSTER_SCHEMA_VERSION) {
        throw new ClusterError(
          `the cluster database has schema ${found}, newer than this release knows (${CLUSTER_SCHEMA_VERSION}): upgrade this node to the release the others run`,
        );
      }
      for (const step of MIGRATIONS) {
        if (step.version <= found) continue;
        await client.query('BEGIN');
        try {
          await client.query(step.sql);
          await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [step.version, step.name]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
        applied.push(`cluster schema ${step.version}: ${step.name}`);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    }
  } finally {
    client.release();
  }
  return applied;
}

/**
 * The cluster key from its file, proven against the database: the first node to start seals a
 * check value with it; a node whose key does not open that value is refused. A missing file is
 * made only when asked (`postilion cluster init`) and only for a database that has no key yet.
 */
async function clusterKey(pool: pg.Pool, path: string, create: boolean): Promise<SecretBox> {
  const check = await sealedKeyCheck(pool);
  if (!existsSync(path)) {
    if (!create) {
      throw new ClusterError(
        check === undefined
          ? `the cluster key ${path} does not exist: run \`postilion cluster init\` on the first node, then copy the file to every node`
          : `the cluster key ${path} does not exist: copy it from a node of this cluster (the same file on every node)`,
      );
    }
    if (check !== undefined) throw new ClusterError(`this cluster already has a key: copy ${path} from one of its nodes instead of making a new one`);
  }
  let key: SecretBox;
  try {
    key = SecretBox.loadOrCreate(path);
  } catch (err) {
    throw new ClusterError(`the cluster key ${path} cannot be used: ${(err as Error).message}`);
  }
  if (check === undefined) {
    await pool.query('INSERT INTO cluster_secrets (name, sealed) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [KEY_CHECK, key.seal(KEY_CHECK)]);
    return clusterKey(pool, path, false);
  }
  if (!isClusterKey(key, check)) throw new ClusterError(`the cluster key ${path} is not this cluster's key: copy the file from one of its nodes`);
  return key;
}

/** The check value sealed with the cluster's key by the first node (undefined: no node has used a key on this database yet). */
export async function sealedKeyCheck(db: pg.Pool | pg.ClientBase): Promise<string | undefined> {
  const { rows } = await db.query<{ sealed: string }>('SELECT sealed FROM cluster_secrets WHERE name = $1', [KEY_CHECK]);
  return rows[0]?.sealed;
}

/** Whether `key` opens the check value: it is the cluster's key. */
export function isClusterKey(key: SecretBox, sealedCheck: string): boolean {
  try {
    return key.open(sealedCheck) === KEY_CHECK;
  } catch {
    return false;
  }
}

/** The cluster's secrets: each made once, by whichever node asks first, sealed with the cluster key. */
async function loadSecrets(pool: pg.Pool, key: SecretBox): Promise<Map<ClusterSecretName, Buffer>> {
  const out = new Map<ClusterSecretName, Buffer>();
  for (const name of CLUSTER_SECRETS) {
    await pool.query('INSERT INTO cluster_secrets (name, sealed) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
      name,
      key.seal(randomBytes(32).toString('hex')),
    ]);
    const { rows } = await pool.query<{ sealed: string }>('SELECT sealed FROM cluster_secrets WHERE name = $1', [name]);
    out.set(name, Buffer.from(key.open(rows[0]!.sealed), 'hex'));
  }
  return out;
}

/** Replaces the cluster's secrets with a single node's own (`postilion cluster import`), so that its tokens and sealed secrets stay valid. */
export async function importSecrets(db: ClusterDb, keysDir: string): Promise<string[]> {
  const taken: string[] = [];
  for (const name of CLUSTER_SECRETS) {
    const path = join(keysDir, name);
    if (!existsSync(path)) continue;
    const raw = SecretBox.loadOrCreate(path).rawKey();
    await db.pool.query('UPDATE cluster_secrets SET sealed = $2 WHERE name = $1', [name, db.key.seal(raw.toString('hex'))]);
    taken.push(name);
  }
  return taken;
}
