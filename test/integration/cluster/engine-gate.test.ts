import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SharedLimits } from '../../../src/cluster/shared-limits.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { JobEngine, type DestinationLimits, type JobKind } from '../../../src/queue/engine.ts';
import { JobIndex } from '../../../src/store/job-index.ts';
import { Store } from '../../../src/store/store.ts';
import { systemClock } from '../../../src/util/time.ts';
import { startRedis, type RedisServer } from '../../helpers/redis.ts';

/**
 * Two job engines, each on its own store as two nodes are, whose dispatchers take destination
 * slots and rate tokens through the SharedLimits of their node: with Redis the limits hold for
 * the two together; with no Redis each keeps to its share.
 */

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(probe: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

interface Job {
  id: string;
  destination: string;
  done: boolean;
}

/** Attempts in flight across both nodes, per destination: what the cluster-wide limits bound. */
class Attempts {
  running = 0;
  peak = 0;
  started: number[] = [];
  private readonly open = new Set<() => void>();

  /** Ends the attempts in flight. */
  finish(): void {
    for (const end of this.open) end();
    this.open.clear();
  }

  async attempt(instant: boolean): Promise<void> {
    this.running += 1;
    this.peak = Math.max(this.peak, this.running);
    this.started.push(Date.now());
    if (!instant) await new Promise<void>((resolve) => this.open.add(resolve));
    this.running -= 1;
  }
}

/** A kind of one node: its attempts are counted in the cluster's Attempts. */
class NodeKind implements JobKind<Job> {
  readonly name = 'message' as const;
  readonly dispatcher = 'smtp' as const;
  readonly jobs = new Map<string, Job>();
  instant = false;

  constructor(
    private readonly store: Store,
    private readonly index: JobIndex,
    private readonly attempts: Attempts,
  ) {}

  async add(ids: string[], destination: string): Promise<void> {
    for (const id of ids) this.jobs.set(id, { id, destination, done: false });
    await this.store.commit(ids.map((id) => this.index.put('message', id, 0)));
  }

  async load(id: string): Promise<Job | null> {
    const job = this.jobs.get(id);
    return job && !job.done ? { ...job } : null;
  }

  dueMs(): number {
    return 0;
  }

  async destination(job: Job): Promise<string> {
    return job.destination;
  }

  async run(job: Job, release: () => void): Promise<void> {
    await this.attempts.attempt(this.instant);
    release();
    this.jobs.get(job.id)!.done = true;
    await this.store.commit([this.index.del('message', job.id, 0)]);
  }

  get finished(): number {
    return [...this.jobs.values()].filter((j) => j.done).length;
  }
}

describe('destination limits of job engines on two nodes', function () {
  this.timeout(30_000);
  let redis: RedisServer;
  let dirs: string[];
  let stores: Store[];
  let engines: JobEngine[];
  let limits: SharedLimits[];
  let attempts: Attempts;

  before(async () => (redis = await startRedis()));
  after(async () => redis?.stop());

  beforeEach(() => {
    dirs = [];
    stores = [];
    engines = [];
    limits = [];
    attempts = new Attempts();
  });

  afterEach(async () => {
    attempts.finish();
    for (const engine of engines) await engine.stop(1000);
    for (const l of limits) await l.close();
    for (const store of stores) await store.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /** One node: its store, its engine with `perDestination` slots per destination, its SharedLimits. */
  async function startNode(options: { redisUrl: string | null; perDestination: number; destinations?: Record<string, DestinationLimits> }): Promise<NodeKind> {
    const dir = mkdtempSync(join(tmpdir(), 'postilion-engine-gate-'));
    dirs.push(dir);
    const store = await Store.open(dir);
    stores.push(store);
    const index = new JobIndex(store);
    const shared = new SharedLimits({ redisUrl: options.redisUrl, liveNodes: () => 2, clock: systemClock, log: createLogger('silent') });
    limits.push(shared);
    await shared.start();
    const dispatcher = { concurrency: 100, perDestination: options.perDestination, readyLimit: 1000 };
    const engine = new JobEngine(
      index,
      { dispatchers: { smtp: dispatcher, http: dispatcher }, destinations: options.destinations ?? {}, suspended: [], gate: shared.destinations },
      systemClock,
      createLogger('silent'),
    );
    const kind = new NodeKind(store, index, attempts);
    engine.register(kind);
    engines.push(engine);
    return kind;
  }

  const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(3, '0')}`);

  it('with Redis, never runs more attempts to a destination on both nodes together than its concurrency, and runs them all', async () => {
    const one = await startNode({ redisUrl: redis.url, perDestination: 3 });
    const two = await startNode({ redisUrl: redis.url, perDestination: 3 });
    await one.add(ids('one', 10), 'mx.shared.test');
    await two.add(ids('two', 10), 'mx.shared.test');
    for (const engine of engines) engine.start();
    await until(() => attempts.running === 3, 'three attempts in flight');
    // Nothing more starts on either node while the three are in flight.
    await sleep(200);
    expect(attempts.running).to.equal(3);
    while (one.finished + two.finished < 20) {
      attempts.finish();
      await sleep(10);
    }
    expect(attempts.peak).to.equal(3);
  });

  it("with Redis, starts a destination's jobs on both nodes together at its rate", async () => {
    const one = await startNode({ redisUrl: redis.url, perDestination: 100, destinations: { 'mx.rate.test': { rate: 10 } } });
    const two = await startNode({ redisUrl: redis.url, perDestination: 100, destinations: { 'mx.rate.test': { rate: 10 } } });
    one.instant = two.instant = true;
    await one.add(ids('one', 40), 'mx.rate.test');
    await two.add(ids('two', 40), 'mx.rate.test');
    const t0 = Date.now();
    for (const engine of engines) engine.start();
    await sleep(1000);
    // The burst of 10 and a second at 10 per second: about 20, where each node on its own would start 40.
    const inFirstSecond = attempts.started.filter((t) => t - t0 <= 1000).length;
    expect(inFirstSecond).to.be.within(15, 23);
  });

  it('without Redis, each of two nodes keeps to half of a destination’s concurrency', async () => {
    const one = await startNode({ redisUrl: null, perDestination: 4 });
    const two = await startNode({ redisUrl: null, perDestination: 4 });
    await one.add(ids('one', 6), 'mx.shared.test');
    await two.add(ids('two', 6), 'mx.shared.test');
    for (const engine of engines) engine.start();
    await until(() => attempts.running === 4, 'four attempts in flight');
    await sleep(100);
    expect(attempts.running).to.equal(4);
    while (one.finished + two.finished < 12) {
      attempts.finish();
      await sleep(10);
    }
    expect(attempts.peak).to.equal(4);
  });
});
