import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { validateConfig } from '../../../src/config/load.ts';
import { ClusterError, openClusterDb } from '../../../src/cluster/database.ts';
import { CLUSTER_SCHEMA_VERSION, MIGRATIONS } from '../../../src/cluster/migrations.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

/** The cluster database's schema, key and secrets, as each node finds them at start. */
describe('cluster: the database, its schema and its key', function () {
  this.timeout(60_000);
  let postgres: PostgresServer;
  let dir: string;

  before(async () => {
    postgres = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), 'postilion-cluster-db-'));
  });
  after(async () => {
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const config = (url: string, keyFile: string, nodeId = 'n1') =>
    validateConfig({ cluster: { database_url: url, node_id: nodeId, key_file: keyFile }, keys: { dir: join(dir, 'keys') } }, 'test');

  it('makes the schema once, shares one set of secrets, and refuses a node without the key or with another key', async () => {
    const url = await postgres.createDatabase();
    const keyFile = join(dir, 'a.key');
    await expectRefused(openClusterDb(config(url, keyFile)), /does not exist: run `postilion cluster init`/);
    const first = await openClusterDb(config(url, keyFile), { createKey: true });
    const second = await openClusterDb(config(url, keyFile, 'n2'));
    try {
      expect([...second.secrets.entries()].map(([n, k]) => [n, k.toString('hex')])).to.deep.equal(
        [...first.secrets.entries()].map(([n, k]) => [n, k.toString('hex')]),
      );
      expect(new Set([...first.secrets.values()].map((k) => k.toString('hex'))).size).to.equal(5);
      const { rows } = await first.pool.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
      // Every step, once (steps made side by side take numbers given out ahead: the list may have gaps until all are in).
      expect(rows.map((r) => r.version)).to.deep.equal(MIGRATIONS.map((m) => m.version));
    } finally {
      await first.close();
      await second.close();
    }
    // A key file of another cluster, and a new key for a cluster that has one.
    const other = join(dir, 'other.key');
    writeFileSync(other, 'ab'.repeat(32) + '\n', { mode: 0o600 });
    await expectRefused(openClusterDb(config(url, other)), /is not this cluster's key/);
    await expectRefused(openClusterDb(config(url, join(dir, 'missing.key')), { createKey: true }), /already has a key/);
    await expectRefused(openClusterDb(config(url, join(dir, 'missing.key'))), /copy it from a node of this cluster/);
  });

  it('refuses a database whose schema is newer than this release', async () => {
    const url = await postgres.createDatabase();
    const pool = new pg.Pool({ connectionString: url });
    await pool.query('CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
    await pool.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [CLUSTER_SCHEMA_VERSION + 1, 'from the future']);
    await pool.end();
    await expectRefused(openClusterDb(config(url, join(dir, 'b.key')), { createKey: true }), /newer than this release knows/);
  });

  it('refuses an unreachable database with a clear error', async () => {
    await expectRefused(openClusterDb(config('postgres://nobody@127.0.0.1:1/none', join(dir, 'c.key'))), /the cluster database cannot be used/);
  });
});

async function expectRefused(p: Promise<{ close(): Promise<void> }>, pattern: RegExp): Promise<void> {
  let refused: unknown = null;
  try {
    const db = await p;
    await db.close();
  } catch (err) {
    refused = err;
  }
  expect(refused, 'refused').to.be.instanceOf(ClusterError);
  expect((refused as Error).message).to.match(pattern);
}
