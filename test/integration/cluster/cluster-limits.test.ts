import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig } from '../../../src/config/load.ts';
import { openClusterDb } from '../../../src/cluster/database.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';
import { startRedis, type RedisServer } from '../../helpers/redis.ts';

/** Two cluster nodes configured with one Redis: an account's API rate is one budget for the cluster; without Redis, each node keeps its share. */
describe('cluster: per-account API rate limits across nodes', function () {
  this.timeout(90_000);
  let postgres: PostgresServer;
  let redis: RedisServer;
  let dir: string;
  const nodes: TestServer[] = [];

  before(async () => {
    [postgres, redis] = await Promise.all([startPostgres(), startRedis()]);
    dir = mkdtempSync(join(tmpdir(), 'postilion-cluster-limits-'));
  });
  afterEach(async () => {
    for (const node of nodes.splice(0)) await node.stop();
  });
  after(async () => {
    await redis?.stop();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function twoNodes(redisUrl: string): Promise<[TestServer, TestServer]> {
    const url = await postgres.createDatabase();
    const keyFile = join(dir, `${url.split('/').at(-1)}.key`);
    await (
      await openClusterDb(validateConfig({ cluster: { database_url: url, key_file: keyFile }, keys: { dir: join(dir, 'keys') } }, 'test'), { createKey: true })
    ).close();
    const config = (nodeId: string) => ({
      cluster: { database_url: url, node_id: nodeId, key_file: keyFile, redis_url: redisUrl },
      api: { rate_limits: { general: { per_second: 0.01, burst: 10 } } },
    });
    const a = await startServer({ config: config('a') });
    nodes.push(a);
    const b = await startServer({ config: config('b') });
    nodes.push(b);
    return [a, b];
  }

  async function burst(a: TestServer, b: TestServer): Promise<number> {
    const base = `/v2/accounts/${a.accountId}/api-keys`;
    let ok = 0;
    for (let i = 0; i < 30; i++) {
      const res = await call({ url: (i % 2 === 0 ? a : b).url, adminKey: a.adminKey }, 'GET', base, { operationId: null });
      if (res.status === 200) ok++;
      else expect(res.status).to.equal(429);
    }
    return ok;
  }

  it('with cluster.redis_url, the account gets its burst of 10 across both nodes, not 10 on each', async () => {
    const [a, b] = await twoNodes(redis.url);
    expect(await burst(a, b)).to.equal(10);
  });

  it('without Redis, each node keeps its share of the burst (10 ÷ 2 live nodes)', async () => {
    const [a, b] = await twoNodes('');
    // The heartbeats count the live nodes: wait for each node to see the other.
    const deadline = Date.now() + 10_000;
    const both = () => a.daemon.parts.cluster.liveNodes() === 2 && b.daemon.parts.cluster.liveNodes() === 2;
    while (!both() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(both()).to.equal(true);
    expect(await burst(a, b)).to.equal(10);
  });
});
