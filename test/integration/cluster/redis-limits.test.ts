import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { RateLimiter, RefusalLimiter } from '../../../src/api/middleware/rate-limit.ts';
import { SharedLimits, type SharedLimitsOptions } from '../../../src/cluster/shared-limits.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { parseClientIp } from '../../../src/util/cidr.ts';
import { AppError } from '../../../src/util/errors.ts';
import { systemClock } from '../../../src/util/time.ts';
import { startRedis, type RedisServer } from '../../helpers/redis.ts';

/**
 * The cluster-wide limits against a real Redis on loopback: each SharedLimits is one node (its
 * own connection), as the daemons of a cluster would hold them.
 */

const LEASE_HOLDER = resolve(dirname(fileURLToPath(import.meta.url)), '../../fixtures/cluster/lease-holder.ts');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const API_LIMITS = { general: { per_second: 10, burst: 10 }, statistics: { per_second: 1, burst: 1 } };

async function until(probe: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Slots of the destination taken through the gate within `ms`: their release functions. */
async function enter(limits: SharedLimits, destination: string, concurrency: number, n: number, ms = 1000): Promise<Array<() => void>> {
  const held: Array<() => void> = [];
  const deadline = Date.now() + ms;
  while (held.length < n && Date.now() < deadline) {
    const entered = limits.destinations.enter(destination, concurrency);
    if (typeof entered === 'function') held.push(entered);
    else await sleep(Math.min(entered, 20));
  }
  return held;
}

/** Whether the call was let through (false: 429). */
async function passes(call: () => unknown): Promise<boolean> {
  try {
    await call();
    return true;
  } catch (err) {
    if (err instanceof AppError && err.status === 429) return false;
    throw err;
  }
}

describe('cluster-wide limits in Redis', function () {
  this.timeout(30_000);
  let redis: RedisServer;
  let nodes: SharedLimits[];
  let admin: Redis;

  before(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { lazyConnect: true });
    await admin.connect();
  });

  after(async () => {
    admin?.disconnect();
    await redis?.stop();
  });

  beforeEach(async () => {
    nodes = [];
    await admin.flushall();
  });

  afterEach(async () => {
    for (const node of nodes) await node.close();
  });

  async function node(options: Partial<SharedLimitsOptions> = {}): Promise<SharedLimits> {
    const limits = new SharedLimits({ redisUrl: redis.url, liveNodes: () => 2, clock: systemClock, log: createLogger('silent'), ...options });
    nodes.push(limits);
    await limits.start();
    return limits;
  }

  it('gives two nodes one budget: 10 requests per second cluster-wide let about 10 of a burst through, not 20', async () => {
    const [a, b] = [await node(), await node()];
    const onA = new RateLimiter(API_LIMITS, systemClock, a.buckets);
    const onB = new RateLimiter(API_LIMITS, systemClock, b.buckets);
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => passes(() => (i % 2 === 0 ? onA : onB).consume('acct-1', 'general'))));
    const let_through = results.filter(Boolean).length;
    // The burst of 10, and what refilled while the 40 went by (a few ms: at most a token or two).
    expect(let_through).to.be.within(10, 12);
    expect(a.stats().redis!.fallbacks).to.equal(0);
    expect(b.stats().redis!.fallbacks).to.equal(0);
    // Another account has its own bucket.
    expect(await passes(() => onB.consume('acct-2', 'general'))).to.equal(true);
  });

  it('answers 429 with a Retry-After worked out in Redis, and lets the other node through once a token is back', async () => {
    const [a, b] = [await node(), await node()];
    const onA = new RateLimiter(API_LIMITS, systemClock, a.buckets);
    const onB = new RateLimiter(API_LIMITS, systemClock, b.buckets);
    await onA.consume('acct-1', 'statistics');
    let refusal: unknown;
    try {
      await onB.consume('acct-1', 'statistics');
    } catch (err) {
      refusal = err;
    }
    expect(refusal).to.be.instanceOf(AppError);
    expect((refusal as AppError).status).to.equal(429);
    expect((refusal as AppError).headers['Retry-After']).to.equal('1');
    await sleep(1050);
    expect(await passes(() => onB.consume('acct-1', 'statistics'))).to.equal(true);
  });

  it('counts the refused authentications of one address on every node', async () => {
    const [a, b] = [await node(), await node()];
    const limit = { per_second: 0.01, burst: 3 };
    const onA = new RefusalLimiter(limit, systemClock, a.buckets);
    const onB = new RefusalLimiter(limit, systemClock, b.buckets);
    const guesser = parseClientIp('198.51.100.7')!;
    await onA.refused(guesser);
    await onA.refused(guesser);
    expect(await passes(() => onB.check(guesser))).to.equal(true);
    await onB.refused(guesser);
    expect(await passes(() => onA.check(guesser))).to.equal(false);
    expect(await passes(() => onB.check(guesser))).to.equal(false);
    // An IPv6 client is counted by its /64, another address not at all.
    expect(await passes(() => onA.check(parseClientIp('198.51.100.8')!))).to.equal(true);
  });

  it('keeps a bucket under postilion:<purpose>:<id>, expiring once it would be full again', async () => {
    const a = await node();
    await new RateLimiter(API_LIMITS, systemClock, a.buckets).consume('acct-1', 'general');
    expect(await admin.keys('*')).to.deep.equal(['postilion:api-rate:general:acct-1']);
    // One token short at 10 per second: full again after 100 ms, kept a second more.
    const ttl = await admin.pttl('postilion:api-rate:general:acct-1');
    expect(ttl).to.be.within(1, 1100);
    await sleep(ttl + 50);
    expect(await admin.keys('*')).to.deep.equal([]);
  });

  it('sends a script whole (EVAL) when Redis no longer knows it by its hash (EVALSHA)', async () => {
    const a = await node();
    const limiter = new RateLimiter(API_LIMITS, systemClock, a.buckets);
    await limiter.consume('acct-1', 'general');
    await admin.script('FLUSH');
    await limiter.consume('acct-1', 'general');
    expect(await admin.hget('postilion:api-rate:general:acct-1', 'tokens')).to.match(/^8(\.\d+)?$/);
    expect(a.stats().redis).to.include({ errors: 0, fallbacks: 0 });
  });

  it("shares a destination's slots: the nodes together hold at most its concurrency, and a slot given back goes to another", async () => {
    const [a, b] = [await node({ leases: { lingerMs: 20 } }), await node({ leases: { lingerMs: 20 } })];
    // A takes its fair share (3 ÷ 2 nodes: 2), B what is left, and then neither gets more.
    const onA = await enter(a, 'mx.example', 3, 2, 300);
    const onB = await enter(b, 'mx.example', 3, 2, 300);
    expect(onA).to.have.length(2);
    expect(onB).to.have.length(1);
    expect(await enter(a, 'mx.example', 3, 1, 300)).to.have.length(0);
    expect(await admin.zcard('postilion:destination-slots:mx.example')).to.equal(3);
    // Another destination has slots of its own.
    expect(await enter(b, 'mx.other', 3, 1)).to.have.length(1);
    // A slot A no longer uses goes back to Redis soon after (lingerMs), and B takes it.
    onA.pop()!();
    const more = await enter(b, 'mx.example', 3, 1, 2000);
    expect(more).to.have.length(1);
    expect(await admin.zcard('postilion:destination-slots:mx.example')).to.equal(3);
    expect(a.stats().leasesHeld + b.stats().leasesHeld).to.equal(4);
  });

  it('gives the slots of a node that dies back to the others once its leases expire, and not before', async () => {
    const a = await node();
    const holder = spawn(process.execPath, ['--import', 'tsx', LEASE_HOLDER, redis.url, 'mx.example', '2', '2', '1500'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<void>((done) => holder.once('exit', () => done()));
    try {
      let out = '';
      holder.stdout.on('data', (d: Buffer) => (out += d.toString()));
      await until(() => out.includes('held 2'), 'the other node to hold both slots', 15_000);
      // It renews its leases while it lives: longer than one lease, A gets nothing.
      expect(await enter(a, 'mx.example', 2, 1, 2500)).to.have.length(0);
      holder.kill('SIGKILL');
      await exited;
      const killedAt = Date.now();
      const got = await enter(a, 'mx.example', 2, 2, 5000);
      expect(got).to.have.length(2);
      expect(Date.now() - killedAt).to.be.below(2500);
    } finally {
      holder.kill('SIGKILL');
      await exited;
      holder.stdout.destroy();
    }
  });

  it('borrows rate tokens in small batches: two nodes at 20 per second together start about as many as one', async () => {
    const [a, b] = [await node(), await node()];
    let started = 0;
    const until = Date.now() + 500;
    while (Date.now() < until) {
      for (const n of [a, b]) if (n.destinations.take('mx.example', 20) === 0) started += 1;
      await sleep(2);
    }
    // The burst of 20 and half a second of refill (10), where two nodes on their own would start 60.
    expect(started).to.be.within(20, 34);
  });

  it('counts the failed SMTP AUTH attempts of one address on every node, and forgets them after a success', async () => {
    const [a, b] = [await node(), await node()];
    const onA = a.authFailures(3, 60_000);
    const onB = b.authFailures(3, 60_000);
    await onA.fail('192.0.2.9');
    await onA.fail('192.0.2.9');
    expect(await onB.blocked('192.0.2.9')).to.equal(false);
    await onB.fail('192.0.2.9');
    expect(await onA.blocked('192.0.2.9')).to.equal(true);
    expect(await onB.blocked('192.0.2.9')).to.equal(true);
    expect(await onA.blocked('192.0.2.10')).to.equal(false);
    await onB.succeed('192.0.2.9');
    expect(await onA.blocked('192.0.2.9')).to.equal(false);
  });

  describe('when Redis goes away', () => {
    let own: RedisServer | null;
    beforeEach(async () => (own = await startRedis()));
    afterEach(async () => {
      own?.resume();
      await own?.stop();
    });

    it("falls back to each node's share when Redis stops, failing no request, and counts it", async () => {
      const [a, b] = [await node({ redisUrl: own!.url }), await node({ redisUrl: own!.url })];
      const onA = new RateLimiter(API_LIMITS, systemClock, a.buckets);
      const onB = new RateLimiter(API_LIMITS, systemClock, b.buckets);
      expect(await passes(() => onA.consume('acct-1', 'general'))).to.equal(true);
      const slot = await enter(a, 'mx.example', 4, 1);
      expect(slot).to.have.length(1);
      await own!.stop();
      await until(() => !a.stats().redis!.up && !b.stats().redis!.up, 'the nodes to see Redis gone');
      // 10 at once cluster-wide: 5 on each of the 2 live nodes.
      const results = await Promise.all(Array.from({ length: 20 }, () => passes(() => onA.consume('acct-1', 'general'))));
      expect(results.filter(Boolean)).to.have.length(5);
      expect(await passes(() => onB.consume('acct-1', 'general'))).to.equal(true);
      // Destinations: 4 slots ÷ 2 nodes, counted here; the rate from this node's share.
      expect(await enter(a, 'mx.example', 4, 3, 300)).to.have.length(2);
      expect(a.destinations.take('mx.example', 10)).to.equal(0);
      expect(await a.authFailures(3, 60_000).blocked('192.0.2.9')).to.equal(false);
      slot[0]!();
      const stats = a.stats();
      expect(stats.redis!.fallbacks).to.be.at.least(20);
      expect(stats.shareSlotsInUse).to.equal(2);
    });

    it('decides alone while Redis answers nothing (a timeout), then asks it again once it answers', async () => {
      const a = await node({ redisUrl: own!.url, redis: { commandTimeoutMs: 150, backoffMs: 300 } });
      const limiter = new RateLimiter(API_LIMITS, systemClock, a.buckets);
      await limiter.consume('acct-1', 'general');
      own!.freeze();
      const started = Date.now();
      expect(await passes(() => limiter.consume('acct-1', 'general'))).to.equal(true);
      expect(Date.now() - started).to.be.below(1000);
      expect(a.stats().redis).to.include({ up: false, errors: 1, fallbacks: 1 });
      // Within the back-off, Redis is not asked: no wait at all.
      const quick = Date.now();
      await limiter.consume('acct-1', 'general');
      expect(Date.now() - quick).to.be.below(50);
      own!.resume();
      await sleep(350);
      const before = a.stats().redis!;
      await limiter.consume('acct-1', 'general');
      const after = a.stats().redis!;
      expect(after.fallbacks).to.equal(before.fallbacks);
      expect(after.commands).to.equal(before.commands + 1);
      expect(after.up).to.equal(true);
    });
  });
});
