/**
 * The store backend the tests run on, one parameter: `POSTILION_TEST_BACKEND=postgres` (npm test's
 * second pass, .mocharc.postgres.json) puts every daemon the harness starts, and every store the
 * contract tests open, in cluster mode on a real PostgreSQL; unset (or `leveldb`), one node on its
 * own LevelDB as always.
 *
 * On PostgreSQL each test process (a mocha worker) starts one server, the first time a test asks,
 * and keeps it until the process exits (test/helpers/postgres.ts ends it then; unreferenced, it
 * neither keeps the process alive nor counts as a leftover): a server costs a second or two to
 * start, a database in it (with the schema and the key) a small part of that. Each data dir gets
 * a database of its own, made with the cluster key (`postilion cluster init`), and keeps it
 * across restarts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openData, type Data } from '../../src/assemblies/core.ts';
import { openClusterDb } from '../../src/cluster/database.ts';
import { validateConfig } from '../../src/config/load.ts';
import type { ConfigInput } from '../../src/config/schema.ts';
import { startPostgres, type PostgresServer } from './postgres.ts';

export type TestBackend = 'leveldb' | 'postgres';

function backendOf(value: string | undefined): TestBackend {
  if (value === undefined || value === '' || value === 'leveldb') return 'leveldb';
  if (value === 'postgres') return 'postgres';
  throw new Error(`POSTILION_TEST_BACKEND=${value}: the backends are leveldb (the default) and postgres`);
}

export const TEST_BACKEND: TestBackend = backendOf(process.env.POSTILION_TEST_BACKEND);

/** Whether the tests run in cluster mode on PostgreSQL. */
export const onPostgres = TEST_BACKEND === 'postgres';

let server: Promise<PostgresServer> | null = null;

/** This process's PostgreSQL server, started on first use and kept until the process exits. */
export function sharedPostgres(): Promise<PostgresServer> {
  server ??= startPostgres().then(
    (started) => {
      // Kept for the rest of the run, on purpose: not a leftover of the file that started it.
      started.unref();
      return started;
    },
    (err: unknown) => {
      server = null;
      throw err;
    },
  );
  return server;
}

/** The cluster settings of each data dir given a database (by the dir's path). */
const databases = new Map<string, NonNullable<ConfigInput['cluster']>>();

/**
 * The cluster settings of a daemon on `dir`: a fresh database of this process's server the first
 * time, with its cluster key made (in `dir`), and the same ones again after.
 */
export async function clusterFor(dir: string): Promise<NonNullable<ConfigInput['cluster']>> {
  const known = databases.get(dir);
  if (known) return known;
  const postgres = await sharedPostgres();
  const cluster = { database_url: await postgres.createDatabase(), node_id: 'test-node', key_file: join(dir, 'cluster.key') };
  const db = await openClusterDb(validateConfig({ cluster, keys: { dir: join(dir, 'keys') } }, 'test'), { createKey: true });
  await db.close();
  databases.set(dir, cluster);
  return cluster;
}

/** Drops the database `clusterFor(dir)` made (its daemon stopped for good, its dir removed). */
export async function dropClusterFor(dir: string): Promise<void> {
  const cluster = databases.get(dir);
  if (!cluster || !server) return;
  databases.delete(dir);
  const name = new URL(cluster.database_url!).pathname.slice(1);
  const client = new pg.Client({ connectionString: (await server).adminUrl });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** Whether any row of any table of the database at `url` contains `text` (as PostgreSQL writes the row as text). */
export async function databaseContains(url: string, text: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows: tables } = await client.query<{ name: string }>(
      "SELECT quote_ident(table_name) AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    );
    for (const { name } of tables) {
      const { rowCount } = await client.query(`SELECT 1 FROM ${name} t WHERE strpos(t::text, $1) > 0 LIMIT 1`, [text]);
      if (rowCount) return true;
    }
    return false;
  } finally {
    await client.end();
  }
}

/** A store opened as the daemon opens it (core.ts openData), on this run's backend. */
export interface TestStore extends Data {
  /** Closes the store and opens it again on the same data (and database). */
  reopen(): Promise<TestStore>;
  /** Closes the store; removes its data dir and database. */
  close(): Promise<void>;
}

/**
 * Opens a store in a fresh temp dir: on LevelDB, or (POSTILION_TEST_BACKEND=postgres) in cluster
 * mode with a database of its own, the shared families in PostgreSQL.
 */
export async function openTestStore(): Promise<TestStore> {
  return openOn(mkdtempSync(join(tmpdir(), 'postilion-store-')));
}

async function openOn(dir: string): Promise<TestStore> {
  const input: ConfigInput = { data: { dir: join(dir, 'data') }, keys: { dir: join(dir, 'keys') } };
  let data: Data;
  try {
    data = await openData(validateConfig(onPostgres ? { ...input, cluster: await clusterFor(dir) } : input, 'test'));
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    await dropClusterFor(dir);
    throw err;
  }
  return {
    ...data,
    reopen: async () => {
      await data.store.close();
      return openOn(dir);
    },
    close: async () => {
      await data.store.close();
      rmSync(dir, { recursive: true, force: true });
      await dropClusterFor(dir);
    },
  };
}
