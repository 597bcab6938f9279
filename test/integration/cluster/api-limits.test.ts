import { expect } from 'chai';
import { createServer } from 'node:net';
import { SharedLimits } from '../../../src/cluster/shared-limits.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { systemClock } from '../../../src/util/time.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { startRedis, type RedisServer } from '../../helpers/redis.ts';

/**
 * Two daemons given SharedLimits over one Redis (as cluster mode gives them): the API's limit of
 * refused authentications per client address holds for both together. Each daemon has its own
 * store, so their accounts differ; the per-account rate is shown shared at the limiter's level
 * (redis-limits.test.ts), and here only that a daemon takes its buckets from the SharedLimits.
 */

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const UNKNOWN_KEY = `aha-sk-${'A'.repeat(64)}`;

describe('API limits of two daemons sharing one Redis', function () {
  this.timeout(60_000);
  let redis: RedisServer;
  let servers: TestServer[];
  let limits: SharedLimits[];

  before(async () => (redis = await startRedis()));
  after(async () => redis?.stop());

  beforeEach(() => {
    servers = [];
    limits = [];
  });

  afterEach(async () => {
    for (const server of servers) await server.stop();
    for (const l of limits) await l.close();
  });

  async function node(redisUrl: string): Promise<TestServer> {
    const shared = new SharedLimits({ redisUrl, liveNodes: () => 2, clock: systemClock, log: createLogger('silent') });
    limits.push(shared);
    await shared.start();
    const server = await startServer({ limits: shared, config: { api: { auth_failures: { per_second: 0.01, burst: 4 } } } });
    servers.push(server);
    return server;
  }

  it('refuses an address on both daemons once its refused authentications on the two reach the burst', async () => {
    const [a, b] = [await node(redis.url), await node(redis.url)];
    expect((await call(a, 'GET', '/v2/ping', { key: UNKNOWN_KEY, operationId: 'ping' })).status).to.equal(401);
    expect((await call(b, 'GET', '/v2/ping', { key: UNKNOWN_KEY, operationId: 'ping' })).status).to.equal(401);
    expect((await call(a, 'GET', '/v2/ping', { key: UNKNOWN_KEY, operationId: 'ping' })).status).to.equal(401);
    // Three refusals so far: one left (each daemon alone would have four).
    expect((await call(b, 'GET', '/v2/ping', { operationId: 'ping' })).status).to.equal(200);
    expect((await call(b, 'GET', '/v2/ping', { key: UNKNOWN_KEY, operationId: 'ping' })).status).to.equal(401);
    for (const server of [a, b]) {
      const limited = await call(server, 'GET', '/v2/ping', { operationId: 'ping' });
      expect(limited.status).to.equal(429);
      expect(limited.body).to.deep.equal({ message: 'Too many failed authentications from this address, rate limited.' });
      expect(Number(limited.headers.get('retry-after'))).to.be.within(90, 100);
    }
    expect(limits[0]!.stats().redis).to.include({ up: true, fallbacks: 0 });
  });

  it('answers every request when its Redis cannot be reached, keeping to its share of the limits', async () => {
    const a = await node(`redis://127.0.0.1:${await closedPort()}`);
    // A burst of 4 refusals cluster-wide: 2 on each of the 2 live nodes.
    expect((await call(a, 'GET', '/v2/ping', { key: UNKNOWN_KEY, operationId: 'ping' })).status).to.equal(401);
    expect((await call(a, 'GET', '/v2/ping', { key: UNKNOWN_KEY, operationId: 'ping' })).status).to.equal(401);
    expect((await call(a, 'GET', '/v2/ping', { operationId: 'ping' })).status).to.equal(429);
    const stats = limits[0]!.stats();
    expect(stats.redis!.up).to.equal(false);
    expect(stats.redis!.fallbacks).to.be.at.least(3);
  });
});
