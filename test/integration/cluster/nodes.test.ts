import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { validateConfig } from '../../../src/config/load.ts';
import type { ConfigInput } from '../../../src/config/schema.ts';
import { ClusterError, migrateCluster, openClusterDb } from '../../../src/cluster/database.ts';
import { NodeRegistry, type NodeInfo } from '../../../src/cluster/nodes.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

const INFO: NodeInfo = {
  version: 'test',
  pid: process.pid,
  hostname: 'test-host',
  api_url: null,
  queue: { queued: 0, ready: 0, in_flight: 0 },
  lease_pid: null,
};

async function until(what: string, test: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Cluster nodes: a node id held by one live process at a time, heartbeats, and what only the leader does. */
describe('cluster: nodes and heartbeats', function () {
  this.timeout(60_000);
  let postgres: PostgresServer;
  let dir: string;
  const pools: pg.Pool[] = [];
  const servers: TestServer[] = [];

  before(async () => {
    postgres = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), 'postilion-nodes-'));
  });
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.stop();
  });
  after(async () => {
    for (const pool of pools) await pool.end();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function migratedPool(): Promise<pg.Pool> {
    const pool = new pg.Pool({ connectionString: await postgres.createDatabase(), max: 4 });
    // pool.end() resolves before its connections have closed: the server's stop may still reach one.
    pool.on('error', () => undefined);
    pools.push(pool);
    await migrateCluster(pool);
    return pool;
  }

  describe('the node registry', () => {
    it('refuses a node id another live process holds, and gives it out once that one stopped', async () => {
      const pool = await migratedPool();
      const first = new NodeRegistry(pool, 'node-a', async () => INFO);
      await first.register();
      const second = new NodeRegistry(pool, 'node-a', async () => INFO);
      let refused: unknown;
      await second.register().catch((err: unknown) => (refused = err));
      expect(refused).to.be.instanceOf(ClusterError);
      expect((refused as Error).message).to.match(/node id "node-a" is held by a live node \(test-host, pid \d+, last heartbeat [\d.]+ s ago\)/);

      // Another id is fine meanwhile.
      await new NodeRegistry(pool, 'node-b', async () => INFO).register();
      await first.stop();
      const { rows } = await pool.query<{ stopped: boolean }>("SELECT stopped_at IS NOT NULL AS stopped FROM nodes WHERE id = 'node-a'");
      expect(rows[0]!.stopped).to.equal(true);
      await second.register();
      const after = await pool.query<{ instance: string; stopped: boolean }>(
        "SELECT instance, stopped_at IS NOT NULL AS stopped FROM nodes WHERE id = 'node-a'",
      );
      expect(after.rows[0]).to.deep.equal({ instance: second.instance, stopped: false });
    });

    it('gives out the id of a node whose heartbeats stopped (it died); the old process, back, finds it taken and says so', async () => {
      const pool = await migratedPool();
      const liveMs = 1000;
      const dead = new NodeRegistry(pool, 'node-a', async () => INFO, { liveMs });
      await dead.register();
      const next = new NodeRegistry(pool, 'node-a', async () => INFO, { liveMs });
      await next.register().then(
        () => expect.fail('taken while the first was live'),
        (err: Error) => expect(err).to.be.instanceOf(ClusterError),
      );
      await new Promise((r) => setTimeout(r, liveMs + 200));
      await next.register();
      await dead.beat();
      expect(dead.health).to.deep.equal({ ok: false, reason: 'another process took the node id "node-a" while this one missed its heartbeats' });
      await next.beat();
      expect(next.health).to.deep.equal({ ok: true });
    });

    it('gives out at once the id of a node whose process died (its lock connection closed), its heartbeat still fresh', async () => {
      const pool = await migratedPool();
      const dead = new NodeRegistry(pool, 'node-k', async () => INFO);
      await dead.register();
      // What kill -9 does to the node: its connections close, PostgreSQL lets its lock go.
      await (dead as unknown as { dropLock(): Promise<void> }).dropLock();
      const next = new NodeRegistry(pool, 'node-k', async () => INFO);
      await next.register();
      await next.stop();
    });

    it('writes a heartbeat every interval with its info, and counts the live nodes', async () => {
      const pool = await migratedPool();
      const a = new NodeRegistry(pool, 'node-a', async () => ({ ...INFO, queue: { queued: 7, ready: 1, in_flight: 2 } }), { heartbeatMs: 100 });
      const b = new NodeRegistry(pool, 'node-b', async () => INFO, { heartbeatMs: 100 });
      await a.register();
      await b.register();
      const beatOf = async () => (await pool.query<{ at: Date; info: NodeInfo }>("SELECT heartbeat_at AS at, info FROM nodes WHERE id = 'node-a'")).rows[0]!;
      const registered = await beatOf();
      a.start();
      b.start();
      try {
        await until('a heartbeat after the registration', async () => (await beatOf()).at > registered.at);
        expect((await beatOf()).info).to.deep.equal({ ...INFO, queue: { queued: 7, ready: 1, in_flight: 2 } });
        await until('two live nodes', () => a.liveNodes() === 2);
        await b.stop();
        await until('one live node once the other stopped', () => a.liveNodes() === 1);
      } finally {
        await a.stop();
        await b.stop();
      }
    });
  });

  describe('in the daemon', () => {
    function clusterInput(url: string, nodeId: string, extra: ConfigInput = {}): ConfigInput {
      return { ...extra, cluster: { database_url: url, node_id: nodeId, key_file: join(dir, 'cluster.key') } };
    }

    async function clusterDatabase(): Promise<string> {
      const url = await postgres.createDatabase();
      const db = await openClusterDb(validateConfig({ cluster: { database_url: url, node_id: 'init', key_file: join(dir, 'cluster.key') } }, 'test'), {
        createKey: true,
      });
      await db.close();
      return url;
    }

    it('refuses a start with the node id of a live node, with the reason; a single node has no cluster parts', async () => {
      const url = await clusterDatabase();
      servers.push(await startServer({ config: clusterInput(url, 'node-1') }));
      let refused: unknown;
      await startServer({ config: clusterInput(url, 'node-1') }).catch((err: unknown) => (refused = err));
      expect(refused).to.be.instanceOf(ClusterError);
      expect((refused as Error).message).to.match(/the cluster node id "node-1" is held by a live node/);
      // The refused start did not take the id over.
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ n: number }>("SELECT count(*)::int AS n FROM nodes WHERE id = 'node-1' AND stopped_at IS NULL");
        expect(rows[0]!.n).to.equal(1);
      } finally {
        await client.end();
      }
      const alone = await startServer();
      servers.push(alone);
      expect(alone.daemon.parts.cluster.isLeader()).to.equal(true);
      expect(alone.daemon.parts.cluster.liveNodes()).to.equal(1);
      expect(alone.daemon.readiness().map((l) => l.name)).not.to.include('cluster database');
      expect(await (await fetch(`${alone.daemon.parts.metrics.url}/metrics`)).text()).not.to.include('postilion_cluster_');
    });

    it('registers, beats, leads and reports it; marks itself stopped at a stop', async () => {
      const url = await clusterDatabase();
      const one = await startServer({ config: clusterInput(url, 'node-1') });
      servers.push(one);
      const two = await startServer({ config: clusterInput(url, 'node-2') });
      servers.push(two);
      await until('a leader', () => one.daemon.parts.cluster.isLeader() || two.daemon.parts.cluster.isLeader());
      // The first node took the lease when it started; the second only tries.
      expect(one.daemon.parts.cluster.isLeader()).to.equal(true);
      expect(two.daemon.parts.cluster.isLeader()).to.equal(false);
      await until('two live nodes', () => one.daemon.parts.cluster.liveNodes() === 2, 5000);
      expect(one.daemon.readiness()).to.deep.include({ name: 'cluster database', ok: true });

      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ id: string; info: NodeInfo }>('SELECT id, info FROM nodes ORDER BY id');
        expect(rows.map((r) => r.id)).to.deep.equal(['node-1', 'node-2']);
        expect(rows[0]!.info).to.include({ pid: process.pid, api_url: one.url });
        expect(rows[0]!.info.version).to.match(/^\d+\.\d+\.\d+/);
        expect(rows[0]!.info.queue).to.deep.equal({ queued: 0, ready: 0, in_flight: 0 });

        const metrics = await (await fetch(`${one.daemon.parts.metrics.url}/metrics`)).text();
        expect(metrics).to.match(/^postilion_cluster_leader 1$/m);
        expect(metrics).to.match(/^postilion_cluster_live_nodes 2$/m);
        expect(metrics).to.match(/^postilion_cluster_leader_changes_total 1$/m);
        expect(metrics).to.match(/^postilion_cluster_pool_connections\{state="total"\} \d+$/m);
        expect(metrics).to.match(/^postilion_cluster_pool_waiting_queries 0$/m);
        expect(metrics).to.match(/^postilion_cluster_publication_lag_seconds [0-9.e-]+$/m);

        // A change made on node 2 is heard by node 1.
        const made = await call({ url: two.url, adminKey: one.adminKey }, 'POST', `/v2/accounts/${one.accountId}/api-keys`, {
          body: { label: 'heard', scopes: ['api-keys:read'] },
        });
        expect(made.status).to.equal(201);
        await until('an invalidation heard on node 1', async () =>
          /^postilion_cluster_invalidations_total\{scope="keys"\} [1-9]/m.test(await (await fetch(`${one.daemon.parts.metrics.url}/metrics`)).text()),
        );

        await servers.pop()!.stop();
        const stopped = await client.query<{ stopped: boolean }>("SELECT stopped_at IS NOT NULL AS stopped FROM nodes WHERE id = 'node-2'");
        expect(stopped.rows[0]!.stopped).to.equal(true);
      } finally {
        await client.end();
      }
    });

    it('runs the DNS re-check and the DKIM rotation on the leader only', async () => {
      const url = await clusterDatabase();
      const everySecond: ConfigInput = {
        domains: { check_schedule: '* * * * * *' },
        dkim: { rotation_schedule: '* * * * * *' },
        api: { idempotency: { purge_schedule: '* * * * * *' } },
      };
      const lines = [[], []] as [string[], string[]];
      const one = await startServer({ config: clusterInput(url, 'node-1', everySecond), logLines: lines[0] });
      servers.push(one);
      await until('node 1 leads', () => one.daemon.parts.cluster.isLeader());
      const two = await startServer({ config: clusterInput(url, 'node-2', everySecond), logLines: lines[1] });
      servers.push(two);
      const ran = (log: string[], msg: string) => log.filter((l) => (JSON.parse(l) as { msg: string }).msg === msg).length;
      const [checks, rotations] = [ran(lines[0], 'domain DNS re-check done'), ran(lines[0], 'DKIM rotation job done')];
      await until(
        'two more DNS re-checks and DKIM rotations on the leader',
        () => ran(lines[0], 'domain DNS re-check done') >= checks + 2 && ran(lines[0], 'DKIM rotation job done') >= rotations + 2,
      );
      // Node 2's jobs fired as often meanwhile: they did nothing.
      expect(ran(lines[1], 'cluster node registered')).to.equal(1);
      expect(ran(lines[1], 'domain DNS re-check done'), 'DNS re-checks on the follower').to.equal(0);
      expect(ran(lines[1], 'DKIM rotation job done'), 'DKIM rotations on the follower').to.equal(0);
    });
  });
});
