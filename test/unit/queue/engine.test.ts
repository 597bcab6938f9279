import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../../../src/logging/logger.ts';
import { LOOKUP_RETRY_MS } from '../../../src/queue/dispatcher.ts';
import { JobEngine, type DestinationLimits, type DispatcherLimits, type JobKind } from '../../../src/queue/engine.ts';
import { HTTP_SCHEDULES, nextHttpAttemptAt } from '../../../src/queue/retry-policy.ts';
import { JobIndex, type JobKindName } from '../../../src/store/job-index.ts';
import { Store } from '../../../src/store/store.ts';
import type { Clock } from '../../../src/util/time.ts';

/**
 * The job engine over a real store's due-time index, with a fake kind whose attempts the test
 * finishes by hand: what starts, when, and how many at once. The clock is moved by hand; the
 * engine's own timers (rate, wake-ups) are real but short.
 */

const T0 = Date.parse('2026-11-21T12:00:00Z');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

class TestClock implements Clock {
  ms = T0;
  now(): number {
    return this.ms;
  }
}

interface FakeJob {
  id: string;
  destination: string;
  dueMs: number;
  /** Set by the outcome: load() then finds nothing to do, as for a delivered message. */
  done: boolean;
}

/**
 * A kind whose attempts wait until the test finishes them (`finish`), or finish at once when
 * `instant` holds for their destination. The outcome takes the job's entry off the index in its
 * batch, as the real kinds' outcomes do.
 */
class FakeKind implements JobKind<FakeJob> {
  readonly dispatcher;
  readonly jobs = new Map<string, FakeJob>();
  /** Attempts started, in order (ids). */
  readonly started: string[] = [];
  readonly finished: string[] = [];
  readonly running = new Map<string, number>();
  /** The most attempts in flight at once, per destination and in all. */
  readonly peak = new Map<string, number>();
  peakTotal = 0;
  instant: (destination: string) => boolean = () => false;
  private readonly gates = new Map<string, () => void>();

  constructor(
    readonly name: JobKindName,
    protected readonly store: Store,
    protected readonly index: JobIndex,
  ) {
    this.dispatcher = name === 'message' ? ('smtp' as const) : ('http' as const);
  }

  async add(id: string, destination: string, dueMs: number): Promise<void> {
    this.jobs.set(id, { id, destination, dueMs, done: false });
    await this.store.commit([this.index.put(this.name, id, dueMs)]);
  }

  async load(id: string): Promise<FakeJob | null> {
    const job = this.jobs.get(id);
    return job && !job.done ? { ...job } : null;
  }

  dueMs(job: FakeJob): number {
    return job.dueMs;
  }

  async destination(job: FakeJob): Promise<string> {
    return job.destination;
  }

  async run(job: FakeJob, release: () => void): Promise<void | 'withdrawn'> {
    this.started.push(job.id);
    const now = (this.running.get(job.destination) ?? 0) + 1;
    this.running.set(job.destination, now);
    this.peak.set(job.destination, Math.max(this.peak.get(job.destination) ?? 0, now));
    this.peakTotal = Math.max(this.peakTotal, this.total());
    if (!this.instant(job.destination)) await new Promise<void>((resolve) => this.gates.set(job.id, resolve));
    this.running.set(job.destination, this.running.get(job.destination)! - 1);
    release();
    this.jobs.get(job.id)!.done = true;
    await this.store.commit([this.index.del(this.name, job.id, job.dueMs)]);
    this.finished.push(job.id);
  }

  /** Ends the attempts in flight (all, or those of one destination). */
  finish(destination?: string): number {
    let n = 0;
    for (const [id, open] of this.gates) {
      if (destination !== undefined && this.jobs.get(id)!.destination !== destination) continue;
      this.gates.delete(id);
      open();
      n += 1;
    }
    return n;
  }

  total(): number {
    return [...this.running.values()].reduce((a, b) => a + b, 0);
  }

  runningAt(destination: string): number {
    return this.running.get(destination) ?? 0;
  }

  startedAt(destination: string): string[] {
    return this.started.filter((id) => this.jobs.get(id)!.destination === destination);
  }

  finishedAt(destination: string): string[] {
    return this.finished.filter((id) => this.jobs.get(id)!.destination === destination);
  }
}

/**
 * A kind that hands its jobs over ahead (handOff 3): the engine gives it up to 3 × concurrency of
 * a destination's jobs at once. Its attempts wait for the test; `withdraw` ends those of a
 * destination as not attempted, as the HTTP client does with the requests waiting for a connection.
 */
class HandOffKind extends FakeKind {
  readonly handOff = 3;
  readonly withdrawals: string[] = [];
  private readonly waiting = new Map<string, { destination: string; end: (how: 'done' | 'withdrawn') => void }>();

  override async run(job: FakeJob, release: () => void): Promise<void | 'withdrawn'> {
    this.started.push(job.id);
    const how = await new Promise<'done' | 'withdrawn'>((end) => this.waiting.set(job.id, { destination: job.destination, end }));
    release();
    if (how === 'withdrawn') return 'withdrawn';
    this.jobs.get(job.id)!.done = true;
    await this.store.commit([this.index.del(this.name, job.id, job.dueMs)]);
    this.finished.push(job.id);
  }

  withdraw(destination: string): void {
    this.withdrawals.push(destination);
    for (const [id, w] of this.waiting) {
      if (w.destination !== destination) continue;
      this.waiting.delete(id);
      w.end('withdrawn');
    }
  }

  override finish(destination?: string): number {
    let n = 0;
    for (const [id, w] of this.waiting) {
      if (destination !== undefined && w.destination !== destination) continue;
      this.waiting.delete(id);
      w.end('done');
      n += 1;
    }
    return n;
  }

  handed(destination: string): number {
    return [...this.waiting.values()].filter((w) => w.destination === destination).length;
  }
}

/** Waits until `probe` holds (the engine works through promises and short timers). */
async function until(probe: () => boolean, what: string, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe('job engine', function () {
  this.timeout(20_000);
  let dir: string;
  let store: Store;
  let index: JobIndex;
  let clock: TestClock;
  let engines: JobEngine[];
  let kinds: FakeKind[];

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-engine-'));
    store = await Store.open(dir);
    index = new JobIndex(store);
    clock = new TestClock();
    engines = [];
    kinds = [];
  });

  afterEach(async () => {
    for (const kind of kinds) kind.finish();
    for (const engine of engines) await engine.stop(1000);
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const limits = (l: Partial<DispatcherLimits> = {}): DispatcherLimits => ({ concurrency: 100, perDestination: 100, readyLimit: 1000, ...l });

  function engineWith(
    options: {
      smtp?: Partial<DispatcherLimits>;
      http?: Partial<DispatcherLimits>;
      destinations?: Record<string, DestinationLimits>;
      suspended?: string[];
      fullReadMs?: number;
    } = {},
  ): { engine: JobEngine; kind: FakeKind; http: FakeKind } {
    const engine = new JobEngine(
      index,
      {
        dispatchers: { smtp: limits(options.smtp), http: limits(options.http) },
        destinations: options.destinations ?? {},
        suspended: options.suspended ?? [],
        fullReadMs: options.fullReadMs,
      },
      clock,
      createLogger('silent'),
    );
    const kind = new FakeKind('message', store, index);
    const http = new FakeKind('webhook', store, index);
    engine.register(kind);
    engine.register(http);
    engines.push(engine);
    kinds.push(kind, http);
    return { engine, kind, http };
  }

  async function addMany(kind: FakeKind, destination: string, n: number, dueMs = T0): Promise<string[]> {
    // Ids never hold a colon: the index key is <kind>:<time>:<id>.
    const label = destination.replace(/[^a-z0-9.]/gi, '_');
    const ids = Array.from({ length: n }, (_, i) => `${label}-${String(i).padStart(3, '0')}`);
    for (const id of ids) await kind.add(id, destination, dueMs);
    return ids;
  }

  /**
   * Starts `engine` on a slow origin's backlog of 1,000 webhook jobs: 250 in its ready queue (4
   * of them running), the rest left capped. Counts the index entries read from then on.
   */
  async function slowBacklog(engine: JobEngine, http: FakeKind): Promise<{ read: number }> {
    const counted = { read: 0 };
    const due = index.due.bind(index);
    index.due = async (...args: Parameters<JobIndex['due']>) => {
      const entries = await due(...args);
      counted.read += entries.length;
      return entries;
    };
    const ops = [];
    for (let i = 0; i < 1000; i++) {
      const id = `slow-${String(i).padStart(4, '0')}`;
      http.jobs.set(id, { id, destination: 'https://slow.test', dueMs: T0, done: false });
      ops.push(index.put('webhook', id, T0));
    }
    await store.commit(ops);
    engine.start();
    await until(() => http.started.length === 4, 'the slow origin busy');
    await sleep(50);
    counted.read = 0;
    return counted;
  }

  async function entries(kind: JobKindName): Promise<string[]> {
    const out: string[] = [];
    for await (const e of index.entries(kind)) out.push(e.id);
    return out;
  }

  it('reads due jobs in batches through loadMany when the kind has it, and drops the entries of jobs it finds done', async () => {
    const { engine, http } = engineWith();
    const batches: number[] = [];
    let singles = 0;
    const many = http as FakeKind & { loadMany?: (ids: readonly string[]) => Promise<Array<FakeJob | null>> };
    many.loadMany = async (ids) => {
      batches.push(ids.length);
      return Promise.all(ids.map((id) => FakeKind.prototype.load.call(http, id)));
    };
    http.load = async () => {
      singles += 1;
      return null;
    };
    http.instant = () => true;
    const ids = await addMany(http, 'https://hooks.test', 100);
    http.jobs.get(ids[7]!)!.done = true;
    engine.start();
    await until(() => http.finished.length === 99, 'all but the done job run');
    expect(singles).to.equal(0);
    expect(batches.reduce((a, b) => a + b, 0)).to.equal(100);
    expect(Math.max(...batches)).to.be.greaterThan(1);
    // Every entry gone, the done job's too (dropped when it was read).
    expect(await entries('webhook')).to.deep.equal([]);
  });

  it('never runs more than the per-destination limit for one destination, and runs them all in turn', async () => {
    const { engine, kind } = engineWith({ smtp: { perDestination: 3 } });
    await addMany(kind, 'mx.a.test', 10);
    engine.start();
    await until(() => kind.runningAt('mx.a.test') === 3, 'three running');
    // Nothing more starts while the three are in flight.
    await sleep(50);
    expect(kind.started).to.have.length(3);
    while (kind.finished.length < 10) {
      kind.finish();
      await sleep(5);
    }
    expect(kind.peak.get('mx.a.test')).to.equal(3);
    expect(new Set(kind.started).size).to.equal(10);
    expect(await entries('message')).to.deep.equal([]);
  });

  it("a destination's own concurrency (delivery.destinations) overrides the per-destination limit", async () => {
    const { engine, kind } = engineWith({ smtp: { perDestination: 5 }, destinations: { 'mx.one.test': { concurrency: 1 } } });
    await addMany(kind, 'mx.one.test', 4);
    await addMany(kind, 'mx.five.test', 8);
    engine.start();
    await until(() => kind.runningAt('mx.five.test') === 5 && kind.runningAt('mx.one.test') === 1, 'five and one running');
    await sleep(50);
    expect([kind.runningAt('mx.one.test'), kind.runningAt('mx.five.test')]).to.deep.equal([1, 5]);
    while (kind.finished.length < 12) {
      kind.finish();
      await sleep(5);
    }
    expect(kind.peak.get('mx.one.test')).to.equal(1);
    expect(kind.peak.get('mx.five.test')).to.equal(5);
  });

  it("never runs more than the dispatcher's concurrency across destinations, and dispatchers count apart", async () => {
    const { engine, kind, http } = engineWith({ smtp: { concurrency: 5, perDestination: 4 }, http: { concurrency: 2, perDestination: 4 } });
    for (const d of ['mx.a.test', 'mx.b.test', 'mx.c.test']) await addMany(kind, d, 4);
    await addMany(http, 'https://hooks.test', 6);
    engine.start();
    await until(() => kind.total() === 5 && http.total() === 2, 'five SMTP and two HTTP running');
    await sleep(50);
    expect([kind.total(), http.total()]).to.deep.equal([5, 2]);
    // Round-robin: the first five went to all three destinations, not one.
    expect(new Set(kind.started.map((id) => kind.jobs.get(id)!.destination)).size).to.equal(3);
    while (kind.finished.length < 12 || http.finished.length < 6) {
      kind.finish();
      http.finish();
      await sleep(5);
    }
    expect(kind.peakTotal).to.equal(5);
    expect(http.peakTotal).to.equal(2);
  });

  it('starts at most `rate` jobs per second of a destination, counted on the clock', async () => {
    const { engine, kind } = engineWith({ destinations: { 'mx.slow.test': { rate: 5 } } });
    kind.instant = () => true;
    await addMany(kind, 'mx.slow.test', 12);
    await addMany(kind, 'mx.free.test', 12);
    engine.start();
    // A full bucket: five at once, then none while the clock stands still. The other
    // destination has no rate and is not held back.
    await until(() => kind.startedAt('mx.free.test').length === 12, 'the destination without a rate done');
    await until(() => kind.startedAt('mx.slow.test').length === 5, 'five started');
    await sleep(300);
    expect(kind.startedAt('mx.slow.test')).to.have.length(5);
    // 200 ms on the clock give one token.
    clock.ms += 200;
    await until(() => kind.startedAt('mx.slow.test').length === 6, 'the sixth started', 2000);
    await sleep(250);
    expect(kind.startedAt('mx.slow.test')).to.have.length(6);
    // A second gives five more (the bucket holds at most five).
    clock.ms += 1000;
    await until(() => kind.startedAt('mx.slow.test').length === 11, 'eleven started', 2000);
    clock.ms += 10_000;
    await sleep(250);
    expect(kind.startedAt('mx.slow.test')).to.have.length(12);
  });

  it('holds a suspended destination (its jobs wait, those in flight finish) and releases it on resume', async () => {
    const { engine, kind } = engineWith({ smtp: { perDestination: 2 }, suspended: ['mx.held.test'] });
    await addMany(kind, 'mx.held.test', 3);
    await addMany(kind, 'mx.other.test', 2);
    engine.start();
    await until(() => kind.runningAt('mx.other.test') === 2, 'the other destination running');
    await sleep(50);
    expect(kind.startedAt('mx.held.test')).to.deep.equal([]);
    expect(engine.destinations().find((d) => d.destination === 'mx.held.test')?.suspended).to.equal(true);
    // New work for it waits too.
    await kind.add('mx.held.test-new', 'mx.held.test', T0);
    engine.notify(T0);
    await sleep(50);
    expect(kind.startedAt('mx.held.test')).to.deep.equal([]);
    expect((await entries('message')).filter((id) => kind.jobs.get(id)?.destination === 'mx.held.test')).to.have.length(4);

    engine.resume('mx.held.test');
    await until(() => kind.runningAt('mx.held.test') === 2, 'two of the held destination running');
    // Suspended again with two in flight: they finish, the other two wait.
    engine.suspend('mx.held.test');
    expect(kind.finish('mx.held.test')).to.equal(2);
    await until(() => kind.finishedAt('mx.held.test').length === 2, 'the two in flight finished');
    await sleep(50);
    expect(kind.startedAt('mx.held.test')).to.have.length(2);
    engine.resume('mx.held.test');
    await until(() => kind.startedAt('mx.held.test').length === 4, 'the rest started');
  });

  it('holds a paused destination until the clock passes the pause, and others meanwhile', async () => {
    const { engine, http } = engineWith();
    http.instant = () => true;
    engine.start();
    engine.pause('https://down.test', T0 + 60_000);
    await addMany(http, 'https://down.test', 3);
    await addMany(http, 'https://up.test', 3);
    engine.notify(T0);
    await until(() => http.startedAt('https://up.test').length === 3, 'the other origin done');
    expect(http.startedAt('https://down.test')).to.deep.equal([]);
    expect(engine.destinations().find((d) => d.destination === 'https://down.test')?.pausedUntil).to.equal(T0 + 60_000);
    clock.ms = T0 + 59_999;
    await engine.wake();
    await sleep(50);
    expect(http.startedAt('https://down.test')).to.deep.equal([]);
    clock.ms = T0 + 60_000;
    await engine.wake();
    await until(() => http.finishedAt('https://down.test').length === 3, 'the paused origin done');
  });

  it('lets another destination finish all its jobs while every slot of a stuck one is taken', async () => {
    const { engine, http } = engineWith({ http: { concurrency: 8, perDestination: 4 } });
    http.instant = (destination) => destination !== 'https://stuck.test';
    await addMany(http, 'https://stuck.test', 20);
    await addMany(http, 'https://fine.test', 30);
    engine.start();
    await until(() => http.finished.length === 30, 'the healthy origin done');
    expect(http.finishedAt('https://fine.test')).to.have.length(30);
    expect(http.runningAt('https://stuck.test')).to.equal(4);
    expect(http.startedAt('https://stuck.test')).to.have.length(4);
  });

  // Without a cap, a stuck destination's jobs fill the ready memory and every other destination
  // waits for it to drain; with its share capped (the daemon gives one origin a quarter), the
  // others' jobs are read on.
  it('reads on for other destinations when a stuck one fills its share of the ready memory', async () => {
    const { engine, http } = engineWith({ http: { concurrency: 8, perDestination: 4, readyLimit: 24, perDestinationReady: 6 } });
    http.instant = (destination) => destination !== 'https://stuck.test';
    // Due first: the stuck origin's jobs are read first and take most of the memory.
    await addMany(http, 'https://stuck.test', 20, T0 - 1000);
    await addMany(http, 'https://fine.test', 30);
    engine.start();
    await until(() => http.finishedAt('https://fine.test').length === 30, 'the healthy origin done');
  });

  // A destination's share full, the jobs read past it are remembered (up to the ready limit)
  // and only as many are read again as it has room for, not the whole backlog each time its
  // queue drains (with this backlog the engine read 1.3 jobs per job; 4.4 with 100,000 jobs and
  // the daemon's limits).
  it('reads a backlog of one destination far larger than its share about once per job, and runs it all', async () => {
    const { engine, http } = engineWith({ http: { concurrency: 8, perDestination: 4, readyLimit: 1000, perDestinationReady: 250 } });
    http.instant = () => true;
    let loads = 0;
    const load = http.load.bind(http);
    http.load = (id: string) => {
      loads += 1;
      return load(id);
    };
    const n = 10_000;
    const ops = [];
    for (let i = 0; i < n; i++) {
      const id = `job-${String(i).padStart(5, '0')}`;
      http.jobs.set(id, { id, destination: 'https://busy.test', dueMs: T0, done: false });
      ops.push(index.put('webhook', id, T0));
    }
    await store.commit(ops);
    engine.start();
    await until(() => http.finished.length === n, 'the backlog done', 15_000);
    expect(new Set(http.started).size).to.equal(n);
    expect(loads).to.be.below(1.15 * n);
  });

  // The jobs in memory keep their entries on the index (their lease): a read begins after them,
  // not at the start of the index, when new jobs come (a fan-out of 100,000 webhook deliveries
  // read some 25 index entries per job run when every read began at the start).
  it('reads past the jobs in memory once, not again at every new job it is told of', async () => {
    const { engine, http } = engineWith({ http: { concurrency: 8, perDestination: 4, readyLimit: 1000, perDestinationReady: 250 } });
    http.instant = (destination) => destination === 'https://fast.test';
    const counted = await slowBacklog(engine, http);
    // New jobs for another origin come in batches, each told of, as the fan-out does.
    for (let b = 1; b <= 50; b++) {
      clock.ms = T0 + b;
      const batch = [];
      for (let i = 0; i < 20; i++) {
        const id = `fast-${b}-${i}`;
        http.jobs.set(id, { id, destination: 'https://fast.test', dueMs: clock.ms, done: false });
        batch.push(index.put('webhook', id, clock.ms));
      }
      await store.commit(batch);
      engine.notify(clock.ms);
      await until(() => http.finishedAt('https://fast.test').length === 20 * b, `batch ${b} run`);
    }
    // About the new entries once each (with the slow origin's thousand read past at each, 50,000).
    expect(counted.read).to.be.below(3000);
    http.instant = () => true;
    const drain = setInterval(() => http.finish(), 5);
    try {
      await until(() => http.finished.length === 2000, 'everything run', 10_000);
    } finally {
      clearInterval(drain);
    }
    expect(await entries('webhook')).to.deep.equal([]);
  });

  // Under load, jobs written a moment after a read began are due just after its "now", and arm
  // the wake-up timer again and again (186 times in a 13 s run of bench:webhooks part 2): a
  // wake-up that read every kind from its start read the jobs in memory each time.
  it('reads on from where it stopped when its timer wakes it for jobs that came due, not past the jobs in memory', async () => {
    const { engine, http } = engineWith({ http: { concurrency: 8, perDestination: 4, readyLimit: 1000, perDestinationReady: 250 }, fullReadMs: 60_000 });
    http.instant = (destination) => destination === 'https://fast.test';
    const counted = await slowBacklog(engine, http);
    // Each batch is due 20 ms on, and only the engine's timer reads it (the clock has moved on
    // by the time it fires).
    for (let b = 1; b <= 10; b++) {
      const at = clock.ms + 20;
      const batch = [];
      for (let i = 0; i < 20; i++) {
        const id = `fast-${b}-${i}`;
        http.jobs.set(id, { id, destination: 'https://fast.test', dueMs: at, done: false });
        batch.push(index.put('webhook', id, at));
      }
      await store.commit(batch);
      engine.notify(at);
      clock.ms = at;
      await until(() => http.finishedAt('https://fast.test').length === 20 * b, `batch ${b} run by the timer`);
    }
    // The new entries about once each (read from the start at each wake-up: 10,000 and more).
    expect(counted.read).to.be.below(600);
  });

  it('runs a job written behind where the engine reads from at once when told of it, and at the next read from the start when not', async () => {
    const { engine, kind } = engineWith({ smtp: { concurrency: 4, perDestination: 2 }, fullReadMs: 1000 });
    await addMany(kind, 'mx.a.test', 4);
    engine.start();
    await until(() => kind.started.length === 2, 'two started');
    // Two run and two wait in memory: the next read begins past all four. Now entries land
    // before them, due earlier (the clock of another writer), one told, one not.
    kind.instant = () => true;
    await kind.add('told', 'mx.b.test', T0 - 5000);
    engine.notify(T0 - 5000);
    await until(() => kind.finished.includes('told'), 'the job told of run', 700);
    await kind.add('untold', 'mx.b.test', T0 - 5000);
    // Reads happen as jobs are told of (here: due now, which reads on from past the four).
    const poke = setInterval(() => engine.notify(T0), 50);
    try {
      await until(() => kind.finished.includes('untold'), 'the job not told of run', 2500);
    } finally {
      clearInterval(poke);
    }
    kind.finish();
    await until(() => kind.finished.length === 6, 'all run');
    expect(await entries('message')).to.deep.equal([]);
  });

  it('hands a kind with handOff up to handOff × concurrency of a destination, counting only its concurrency against the total', async () => {
    const engine = new JobEngine(
      index,
      {
        dispatchers: { smtp: limits(), http: limits({ concurrency: 4, perDestination: 2 }) },
        destinations: {},
        suspended: [],
      },
      clock,
      createLogger('silent'),
    );
    const http = new HandOffKind('webhook', store, index);
    engine.register(http);
    engines.push(engine);
    kinds.push(http);
    await addMany(http, 'https://a.test', 10);
    await addMany(http, 'https://b.test', 10);
    engine.start();
    // 2 destinations × 2 under way = the total of 4; each has 4 more handed over, waiting.
    await until(() => http.handed('https://a.test') === 6 && http.handed('https://b.test') === 6, 'both destinations handed 6');
    await sleep(50);
    expect(http.started).to.have.length(12);
    const a = engine.destinations().find((d) => d.destination === 'https://a.test')!;
    expect(a).to.include({ running: 2, concurrency: 2, ready: 8 });

    // Suspended: what was handed over is withdrawn, not attempted, and waits with the rest.
    engine.suspend('https://a.test');
    expect(http.withdrawals).to.deep.equal(['https://a.test']);
    await sleep(100);
    expect(http.handed('https://a.test')).to.equal(0);
    expect(http.finishedAt('https://a.test')).to.deep.equal([]);
    expect(await entries('webhook')).to.have.length(20);
    // The other destination goes on; resumed, the withdrawn jobs are read again and all run once.
    http.instant = () => true;
    http.finish('https://b.test');
    engine.resume('https://a.test');
    const drain = setInterval(() => http.finish(), 5);
    try {
      await until(() => http.finished.length === 20, 'every job done');
    } finally {
      clearInterval(drain);
    }
    expect(new Set(http.finished).size).to.equal(20);
    expect(await entries('webhook')).to.deep.equal([]);
  });

  it('logs a job whose destination lookup fails, keeps it queued, and runs it under its destination once the lookup works', async () => {
    const lines: Array<{ level: string; msg: string; kind?: string; id?: string; err?: { message: string } }> = [];
    const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    const engine = new JobEngine(index, { dispatchers: { smtp: limits(), http: limits() }, destinations: {}, suspended: [] }, clock, log);
    let failing = true;
    const lookups: string[] = [];
    const ranAt = new Map<string, string>();
    /** The lookup of the job 'lost' fails while `failing` holds; each attempt records its destination. */
    class LookupKind extends FakeKind {
      override async destination(job: FakeJob): Promise<string> {
        lookups.push(job.id);
        if (failing && job.id === 'lost') throw new Error('MX lookup timed out');
        return super.destination(job);
      }

      override run(job: FakeJob, release: () => void, destination?: string): Promise<void | 'withdrawn'> {
        ranAt.set(job.id, destination!);
        return super.run(job, release);
      }
    }
    const kind = new LookupKind('message', store, index);
    engine.register(kind);
    engines.push(engine);
    kinds.push(kind);
    kind.instant = () => true;
    await kind.add('lost', 'mx.a.test', T0);
    await kind.add('found', 'mx.a.test', T0);
    engine.start();
    await until(() => kind.finished.includes('found'), 'the job whose lookup works run');
    await until(() => lines.some((l) => l.id === 'lost'), 'a log line naming the job');
    const line = lines.find((l) => l.id === 'lost')!;
    expect(line).to.include({ level: 'warn', kind: 'message' });
    expect(line.err?.message).to.equal('MX lookup timed out');
    // Neither run (under a made-up destination) nor dropped: its entry waits on the index, and
    // the engine wakes for it when the back-off is over. Read again meanwhile, it is not looked up.
    await engine.wake();
    await sleep(50);
    expect(kind.started).to.deep.equal(['found']);
    expect(lookups.filter((id) => id === 'lost')).to.have.length(1);
    expect(await entries('message')).to.deep.equal(['lost']);
    expect(engine.holds('message', 'lost')).to.equal(false);
    expect(engine.destinations()).to.deep.equal([]);
    expect(engine.snapshot().nextWakeAt).to.equal(T0 + LOOKUP_RETRY_MS);

    failing = false;
    clock.ms = T0 + LOOKUP_RETRY_MS;
    await engine.wake();
    await until(() => kind.finished.includes('lost'), 'the job run once its lookup works');
    expect(kind.started).to.deep.equal(['found', 'lost']);
    expect(ranAt.get('lost')).to.equal('mx.a.test');
    expect(await entries('message')).to.deep.equal([]);
  });

  it('drops an entry whose job is gone (load finds nothing) and never runs it', async () => {
    const { engine, kind } = engineWith();
    kind.instant = () => true;
    await kind.add('kept', 'mx.a.test', T0);
    // An entry left behind with no record (purged, or finished by a change that raced the read).
    await store.commit([index.put('message', 'ghost', T0 - 1000)]);
    await kind.add('future', 'mx.a.test', T0 + 3_600_000);
    expect(await entries('message')).to.deep.equal(['ghost', 'kept', 'future']);
    engine.start();
    await until(() => kind.finished.length === 1, 'the real job done');
    await sleep(50);
    expect(kind.started).to.deep.equal(['kept']);
    expect(await entries('message')).to.deep.equal(['future']);
  });

  it('skips an entry whose record has moved to a later due time, and runs the job once when that time comes', async () => {
    const { engine, kind } = engineWith();
    kind.instant = () => true;
    // The record says T0 + 1 h; an older entry at T0 - 1 s is still on the index.
    await kind.add('moved', 'mx.a.test', T0 + 3_600_000);
    await store.commit([index.put('message', 'moved', T0 - 1000)]);
    engine.start();
    await engine.wake();
    await sleep(100);
    expect(kind.started).to.deep.equal([]);
    clock.ms = T0 + 3_600_000;
    await engine.wake();
    await until(() => kind.finished.length === 1, 'the job run at its time');
    await engine.wake();
    await sleep(100);
    expect(kind.started).to.deep.equal(['moved']);
    // The stale entry finds nothing to do once the job is done, and goes.
    expect(await entries('message')).to.deep.equal([]);
  });
  it('starts no job and reads nothing while the store refuses writes; runs what is due once it takes them again', async () => {
    const { engine, kind } = engineWith({ smtp: { concurrency: 1 } });
    const ids = await addMany(kind, 'a.test', 3);
    engine.start();
    await until(() => kind.started.length === 1, 'the first attempt');
    let reads = 0;
    const due = index.due.bind(index);
    index.due = async (...args: Parameters<JobIndex['due']>) => {
      reads += 1;
      return due(...args);
    };
    engine.storageWritable(false);
    // The attempt in flight finishes; nothing new starts, however often the engine is woken.
    kind.finish();
    await until(() => kind.finished.length === 1, 'the attempt in flight to finish');
    await engine.wake();
    engine.notify(clock.now());
    await sleep(50);
    expect(kind.started).to.deep.equal([ids[0]]);
    expect(reads).to.equal(0);
    kind.instant = () => true;
    engine.storageWritable(true);
    await until(() => kind.finished.length === 3, 'the rest after the store recovered');
    expect(kind.started).to.deep.equal(ids);
  });

  it('takes back the jobs handed to a dispatcher ahead and not started when the store refuses writes', async () => {
    const engine = new JobEngine(
      index,
      { dispatchers: { smtp: limits(), http: limits({ perDestination: 1 }) }, destinations: {}, suspended: [] },
      clock,
      createLogger('silent'),
    );
    const kind = new HandOffKind('webhook', store, index);
    engine.register(kind);
    engines.push(engine);
    kinds.push(kind);
    await addMany(kind, 'https://hook.test', 3);
    engine.start();
    await until(() => kind.handed('https://hook.test') === 3, 'three handed over');
    engine.storageWritable(false);
    expect(kind.withdrawals).to.deep.equal(['https://hook.test']);
    await sleep(50);
    expect(kind.handed('https://hook.test')).to.equal(0);
    engine.storageWritable(true);
    await until(() => kind.handed('https://hook.test') === 3, 'handed over again after the store recovered');
  });
});

describe('webhook retry schedule (HTTP_SCHEDULES.webhook)', () => {
  const now = T0;
  const delays = [1, 16, 81, 256, 625];

  it('waits n⁴ s after the n-th failed attempt, spread by at most ±10 %', () => {
    for (const [i, seconds] of delays.entries()) {
      const failed = i + 1;
      expect(nextHttpAttemptAt(failed, now, HTTP_SCHEDULES.webhook, () => 0.5)! - now, `after ${failed}`).to.equal(seconds * 1000);
      expect(nextHttpAttemptAt(failed, now, HTTP_SCHEDULES.webhook, () => 0)! - now, `after ${failed}, earliest`).to.equal(Math.round(seconds * 1000 * 0.9));
      expect(nextHttpAttemptAt(failed, now, HTTP_SCHEDULES.webhook, () => 1)! - now, `after ${failed}, latest`).to.equal(Math.round(seconds * 1000 * 1.1));
      for (let k = 0; k < 50; k++) {
        const delay = nextHttpAttemptAt(failed, now, HTTP_SCHEDULES.webhook)! - now;
        expect(delay).to.be.within(seconds * 900, seconds * 1100);
      }
    }
  });

  it('gives up after the sixth attempt: 6 attempts in all', () => {
    expect(HTTP_SCHEDULES.webhook.attempts).to.equal(6);
    expect(nextHttpAttemptAt(6, now, HTTP_SCHEDULES.webhook, () => 0.5)).to.equal(null);
    expect(nextHttpAttemptAt(7, now, HTTP_SCHEDULES.webhook, () => 0.5)).to.equal(null);
    // Five waits between six attempts: 1 + 16 + 81 + 256 + 625 s ≈ 16.3 minutes.
    let at = now;
    let attempts = 1;
    for (let failed = 1; ; failed++) {
      const next = nextHttpAttemptAt(failed, at, HTTP_SCHEDULES.webhook, () => 0.5);
      if (next === null) break;
      at = next;
      attempts += 1;
    }
    expect(attempts).to.equal(6);
    expect(at - now).to.equal(979_000);
  });
});
