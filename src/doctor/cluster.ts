import { existsSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { clusterKeyPath, clusterNodeId, clusterUrl, isClustered, isClusterKey, sealedKeyCheck } from '../cluster/database.ts';
import { CLUSTER_SCHEMA_VERSION } from '../cluster/migrations.ts';
import type { Config } from '../config/schema.ts';
import { SecretBox } from '../util/secret-box.ts';
import { fail, ok, warn, type Check } from './check.ts';

/** How long the cluster database may take to answer. */
const ANSWER_MS = 5000;

/**
 * The cluster section (when set): the database answers, its schema is not newer than this
 * release, and the key file is there and is the cluster's. Reads only: no schema applied, no key
 * made, nothing written to the database.
 */
export async function checkCluster(config: Config): Promise<Check[]> {
  if (!isClustered(config)) return [];
  let client: pg.Client;
  try {
    client = new pg.Client({
      connectionString: clusterUrl(config),
      connectionTimeoutMillis: ANSWER_MS,
      query_timeout: ANSWER_MS,
      application_name: 'postilion doctor',
    });
  } catch (err) {
    return [fail('cluster database', (err as Error).message)];
  }
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    return [fail('cluster database', `cannot be reached: ${(err as Error).message}: node ${clusterNodeId(config)} does not start`)];
  }
  try {
    const { rows } = await client.query<{ version: string }>("SELECT current_setting('server_version') AS version");
    const checks = [ok('cluster database', `reachable (PostgreSQL ${rows[0]?.version ?? '?'}); this node is "${clusterNodeId(config)}"`)];
    const schema = await schemaCheck(client);
    checks.push(schema.check);
    checks.push(await keyCheck(client, clusterKeyPath(config), schema.version > 0));
    return checks;
  } catch (err) {
    return [fail('cluster database', `reachable, but a read failed: ${(err as Error).message}`)];
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function schemaCheck(client: pg.Client): Promise<{ version: number; check: Check }> {
  const { rows: found } = await client.query<{ exists: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS exists");
  if (!found[0]?.exists) {
    return {
      version: 0,
      check: warn('cluster schema', 'the database is empty: run `postilion cluster init` (the first node to start also applies the schema)'),
    };
  }
  const { rows } = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations');
  const version = rows[0]?.v ?? 0;
  if (version > CLUSTER_SCHEMA_VERSION) {
    return {
      version,
      check: fail(
        'cluster schema',
        `${version}, newer than this release knows (${CLUSTER_SCHEMA_VERSION}): this node does not start; upgrade it to the release the others run`,
      ),
    };
  }
  if (version < CLUSTER_SCHEMA_VERSION)
    return { version, check: ok('cluster schema', `${version}; this release brings it to ${CLUSTER_SCHEMA_VERSION} when it starts`) };
  return { version, check: ok('cluster schema', `${version}, this release's`) };
}

async function keyCheck(client: pg.Client, path: string, hasSchema: boolean): Promise<Check> {
  if (!existsSync(path)) {
    return fail(
      'cluster key',
      `${path} does not exist: this node does not start; copy the file from a node of the cluster (or run \`postilion cluster init\` on the first)`,
    );
  }
  let raw: Buffer;
  try {
    raw = Buffer.from(readFileSync(path, 'utf8').trim(), 'hex');
  } catch (err) {
    return fail('cluster key', `${path} cannot be read: ${(err as Error).message}`);
  }
  if (raw.length !== 32) return fail('cluster key', `${path} does not hold a 32-byte hex key: this node does not start`);
  const key = SecretBox.fromKey(raw);
  const sealed = hasSchema ? await sealedKeyCheck(client) : undefined;
  if (sealed === undefined)
    return ok('cluster key', `${path} is there; no node has used a key on this database yet: the first to start makes it the cluster's`);
  if (!isClusterKey(key, sealed))
    return fail('cluster key', `${path} is not this cluster's key: this node does not start; copy the file from one of its nodes`);
  return ok('cluster key', `${path} is the cluster's key`);
}
