import { existsSync } from 'node:fs';
import { Command } from 'commander';
import pg from 'pg';
import { ClusterError, clusterKeyPath, clusterUrl, isClustered, migrateCluster, openClusterDb } from '../cluster/database.ts';
import { readClusterStatus, type ClusterStatus } from '../cluster/status.ts';
import type { Config } from '../config/schema.ts';
import { clusterImportCommand } from './cluster-import.ts';
import { configFrom } from './config-option.ts';
import type { CliIo } from './io.ts';
import { json } from './print.ts';
import { age, table } from './queue-format.ts';

/** What `cluster init` did. */
interface InitResult {
  schema: number;
  /** The schema steps applied now (empty: the database was up to date). */
  applied: string[];
  key_file: string;
  /** Whether the key file was made now (false: it existed, and is this cluster's). */
  key_made: boolean;
}

/** `postilion cluster …`: set up a cluster's database, and see its nodes. */
export function clusterCommands(program: Command, io: CliIo): Command {
  const cluster = new Command('cluster').description(
    "several nodes on one PostgreSQL (cluster.database_url): set up its database, see its nodes and leader, import a single node's accounts, keys and domains",
  );
  cluster
    .command('init')
    .description(
      "bring the cluster database's schema up to date and make the cluster key (cluster.key_file) when it does not exist; run it once on the first node, then copy the key file to every other node",
    )
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const result = await init(clusterConfig(program));
      io.out(opts.json ? json(result) : formatInit(result));
    });
  cluster
    .command('status')
    .description("the nodes with their last heartbeat (live, lost or stopped), the leader, each node's queue and its last publication")
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const status = await withClient(clusterConfig(program), readClusterStatus);
      io.out(opts.json ? json(status) : formatClusterStatus(status));
    });
  cluster.addCommand(clusterImportCommand(program, io));
  return cluster;
}

function clusterConfig(program: Command): Config {
  const config = configFrom(program);
  if (!isClustered(config)) throw new ClusterError('this configuration is not for a cluster: set cluster.database_url (or cluster.database_url_file) first');
  return config;
}

async function init(config: Config): Promise<InitResult> {
  const keyFile = clusterKeyPath(config);
  const keyMade = !existsSync(keyFile);
  // The schema first, to tell which steps were applied; then the key is made (when missing) and
  // checked, and the cluster's secrets made, as a node's start does.
  const pool = new pg.Pool({ ...connectionOf(config), max: 1 });
  pool.on('error', () => undefined);
  let applied: string[];
  let schema: number;
  try {
    applied = await migrateCluster(pool);
    const { rows } = await pool.query<{ v: number }>('SELECT max(version) AS v FROM schema_migrations');
    schema = rows[0]!.v;
  } catch (err) {
    throw unusable(err);
  } finally {
    await pool.end();
  }
  const db = await openClusterDb(config, { createKey: true });
  await db.close();
  return { schema, applied, key_file: keyFile, key_made: keyMade };
}

function connectionOf(config: Config): pg.ClientConfig {
  return { connectionString: clusterUrl(config), connectionTimeoutMillis: 10_000, application_name: 'postilion cluster' };
}

function unusable(err: unknown): ClusterError {
  return err instanceof ClusterError ? err : new ClusterError(`the cluster database cannot be used: ${(err as Error).message}`);
}

/** Runs `work` on a connection of its own to the cluster database. */
async function withClient<T>(config: Config, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(connectionOf(config));
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await work(client);
  } catch (err) {
    throw unusable(err);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export function formatInit(r: InitResult): string {
  const schema =
    r.applied.length === 0
      ? `cluster database: schema ${r.schema}, already up to date`
      : `cluster database: schema brought to ${r.schema} (${r.applied.map((s) => s.replace(/^cluster schema /, '')).join('; ')})`;
  const key = r.key_made
    ? `cluster key: made ${r.key_file}: copy this file to every node (cluster.key_file) and keep a copy safe; without it the cluster's secrets and DKIM keys cannot be read`
    : `cluster key: ${r.key_file} is this cluster's key`;
  return `${schema}\n${key}\n`;
}

export function formatClusterStatus(s: ClusterStatus): string {
  const leader = s.leader ?? (s.leader_backend_pid !== null ? `being taken (database backend ${s.leader_backend_pid})` : 'none: no node holds the lease');
  const newer = s.schema > s.release_schema ? ` (newer than this release's ${s.release_schema}: upgrade this host's postilion)` : '';
  const lines = [`schema: ${s.schema}${newer}`, `leader: ${leader}`, `live nodes: ${s.live_nodes} of ${s.nodes.length}`];
  if (s.nodes.length === 0) return `${lines.join('\n')}\n\nno node has started on this database yet\n`;
  const headers = ['NODE', 'STATE', 'HEARTBEAT', 'LEADER', 'QUEUED', 'READY', 'IN FLIGHT', 'PUBLISHED', 'VERSION', 'HOST', 'PID', 'API'];
  const rows = s.nodes.map((n) => {
    const q = n.info.queue;
    return [
      n.id,
      n.state,
      `${age(n.heartbeat_age_seconds * 1000)} ago`,
      n.leader ? 'yes' : '-',
      q?.queued ?? '-',
      q?.ready ?? '-',
      q?.in_flight ?? '-',
      n.publication ? `${age(n.publication.age_seconds * 1000)} ago` : '-',
      n.info.version ?? '-',
      n.info.hostname ?? '-',
      n.info.pid ?? '-',
      n.info.api_url ?? '-',
    ].map(String);
  });
  return `${lines.join('\n')}\n\n${table(headers, rows, new Set([4, 5, 6, 10]))}`;
}
