import type { Logger } from 'pino';
import type { DestinationGate } from '../cluster/destination-gate.ts';
import type { Clock } from '../util/time.ts';
import { DestinationStates } from './destination-states.ts';
import { describeDestinations, type EngineDestination } from './engine-view.ts';
import type { Claim, Ending, Fill, Placer, Visit } from './claim.ts';
import type { IndexReader } from './index-reader.ts';
import type { LaneLimits } from './shaping/lane-shaping.ts';
import type { DestinationLimits, DispatcherLimits, DispatcherName, JobKind } from './job-kind.ts';
import { ReadyQueues, type QueueSnapshot } from './ready-queues.ts';
import { splitLane } from './lane.ts';

/**
 * A job whose destination could not be looked up is read again after this long (ms), its entry
 * left on the index meanwhile: a fixed back-off, the same for every kind (no attempt was made).
 */
export const LOOKUP_RETRY_MS = 10_000;

export interface DispatchOptions {
  dispatchers: Record<DispatcherName, DispatcherLimits>;
  destinations: Record<string, DestinationLimits>;
  /** Destinations suspended when the engine starts (kept in the store by the operator's commands). */
  suspended: Iterable<string>;
  /** Rate tokens and slots shared with other nodes (cluster/), asked besides the limits here; none on one node. */
  gate?: DestinationGate | undefined;
  /** Traffic shaping: limits per lane below the operator's, and the throttles replies put on lanes. */
  shaping?: LaneLimits | undefined;
}

/** What the dispatcher tells the rest of the engine. */
export interface DispatchLinks {
  /** The jobs taken off the index: let go, held, capped, ended. */
  claims: Pick<IndexReader, 'letGo' | 'skip' | 'unskip' | 'retryLater' | 'cap' | 'uncap' | 'end'>;
  /** Reads the index now (coalesced). */
  wake(): void;
}

/** A destination lookup that failed (a rejected JobKind.destination). */
class LookupFailure {
  constructor(readonly err: unknown) {}
}

function lookUp(claim: Claim): Promise<string | LookupFailure> {
  try {
    return claim.kind.destination(claim.job).catch(failed);
  } catch (err) {
    return Promise.resolve(failed(err));
  }
}

function failed(err: unknown): LookupFailure {
  return new LookupFailure(err);
}

/**
 * The engine's dispatching half: files the due jobs the index reader hands it under their
 * destinations (an MX set, a URL origin), in bounded ready queues per dispatcher (SMTP, HTTP)
 * and destination, and hands them to their kinds within the dispatcher's and the destination's
 * concurrency and rate, and not at all while the destination is suspended or paused as down.
 */
export class Dispatcher implements Placer {
  private readonly pools: Record<DispatcherName, ReadyQueues>;
  private readonly states: DestinationStates;
  private readonly gate: DestinationGate | null;
  private readonly shaping: LaneLimits | null;
  /** The kinds that hand jobs over ahead (JobKind.handOff above 1): asked to withdraw them. */
  private readonly handingOff: JobKind[] = [];
  private rateTimer: NodeJS.Timeout | null = null;
  /** When the rate timer fires (performance.now()): a shorter wait found later arms it again, earlier. */
  private rateTimerAt = 0;
  private unfinished = 0;
  private readonly idle = new Set<() => void>();
  private stopped = true;
  /** False while the store refuses writes: no attempt starts (its outcome could not be written). */
  private canWrite = true;

  constructor(
    options: DispatchOptions,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly links: DispatchLinks,
  ) {
    this.pools = { smtp: new ReadyQueues(options.dispatchers.smtp), http: new ReadyQueues(options.dispatchers.http) };
    this.states = new DestinationStates(options.destinations, options.suspended, clock, options.shaping);
    this.gate = options.gate ?? null;
    this.shaping = options.shaping ?? null;
  }

  register(kind: JobKind): void {
    if ((kind.handOff ?? 1) > 1) {
      this.pools[kind.dispatcher].handsOff = true;
      this.handingOff.push(kind);
    }
  }

  start(): void {
    this.stopped = false;
  }

  /** Starts nothing more; the ready jobs are let go. */
  stop(): void {
    this.stopped = true;
    if (this.rateTimer) clearTimeout(this.rateTimer);
    this.rateTimer = null;
    for (const pool of Object.values(this.pools)) for (const item of pool.clear()) this.links.claims.letGo(item);
  }

  /** Waits (up to `graceMs`) for the attempts in flight and their outcomes. */
  async settled(graceMs: number): Promise<void> {
    if (this.unfinished === 0) return;
    await new Promise<void>((resolve) => {
      const timeout = setTimeout(resolve, graceMs);
      this.idle.add(() => {
        clearTimeout(timeout);
        resolve();
      });
    });
  }

  get writable(): boolean {
    return this.canWrite;
  }

  /**
   * The store refuses writes (false) or takes them again (true). While it refuses, no attempt
   * starts: jobs handed to a dispatcher ahead and not started are taken back (withdrawn).
   */
  storageWritable(ok: boolean): void {
    this.canWrite = ok;
    if (!ok) for (const pool of Object.values(this.pools)) for (const destination of [...pool.runningPer.keys()]) this.withdraw(destination);
  }

  /** Starts what the limits allow, in every dispatcher. */
  dispatchAll(): void {
    for (const pool of Object.values(this.pools)) this.dispatch(pool);
  }

  /** Stops starting jobs for the destination; those in flight finish. */
  suspend(destination: string): void {
    this.states.suspend(destination);
    this.setAside(destination);
    this.withdraw(destination);
  }

  /** The destination is suspended no more; true when it was (its jobs are to be read again). */
  resume(destination: string): boolean {
    if (!this.states.resume(destination)) return false;
    this.links.claims.unskip(destination);
    return true;
  }

  isSuspended(destination: string): boolean {
    return this.states.isSuspended(destination);
  }

  /**
   * Starts no job for the destination before `untilMs` (it was found down): its ready jobs are
   * parked by their kind (kind.setAside), as those read while the pause lasts are, or else go
   * back to the store and are read again once the pause is over. False when it was paused as long.
   */
  pause(destination: string, untilMs: number): boolean {
    if (!this.states.pause(destination, untilMs)) return false;
    for (const pool of Object.values(this.pools)) this.park(pool, destination);
    this.setAside(destination);
    this.withdraw(destination);
    return true;
  }

  /** The destination answers again: its pause ends now. True when it was paused. */
  unpause(destination: string): boolean {
    if (!this.states.unpause(destination)) return false;
    if (!this.states.isSuspended(destination)) this.links.claims.unskip(destination);
    return true;
  }

  /** Pauses that are over: their set-aside jobs may be read again. */
  endPauses(now: number): void {
    this.states.endPauses(now, (destination) => this.links.claims.unskip(destination));
  }

  /**
   * Files the jobs of one read under their destinations: into the ready queues; set aside
   * (the destination is down and their kind parks jobs); left on the index (the destination's
   * share of ready memory is full); or, when their destination cannot be looked up, let go to
   * be read again after LOOKUP_RETRY_MS. Then starts what the limits allow.
   */
  async place(fill: Fill, found: Claim[]): Promise<Visit[] | null> {
    const { kind, now } = fill;
    const pool = this.pools[kind.dispatcher];
    const destinations = await Promise.all(found.map(lookUp));
    const aside = new Map<string, Claim[]>();
    const ready: Claim[] = [];
    const readyTo: string[] = [];
    /** How many of each destination this read adds to its ready queue. */
    const adding = new Map<string, number>();
    let past: Visit[] | null = null;
    for (const [i, claim] of found.entries()) {
      const destination = destinations[i]!;
      if (typeof destination !== 'string') {
        const message = `could not look up the destination of a job; it is read again in ${LOOKUP_RETRY_MS / 1000} s`;
        this.log.warn({ err: destination.err, kind: kind.name, id: claim.entry.id }, message);
        this.links.claims.retryLater(claim, now + LOOKUP_RETRY_MS);
        fill.fresh -= 1;
        continue;
      }
      if (kind.setAside && this.states.down(destination, now)) {
        const list = aside.get(destination);
        if (list) list.push(claim);
        else aside.set(destination, [claim]);
        continue;
      }
      const queued = (pool.ready.get(destination)?.length ?? 0) + (adding.get(destination) ?? 0);
      if (pool.limits.perDestinationReady !== undefined && queued >= pool.limits.perDestinationReady) {
        // Its share of memory is full: left on the index, and not read again until it drains.
        this.links.claims.letGo(claim);
        fill.fresh -= 1;
        // Remembered up to a bound (the ready limit): past it, reading on for other
        // destinations would read this one's backlog again and again; it waits.
        if (this.links.claims.cap(destination, claim, pool.limits.readyLimit)) fill.again = true;
        else (past ??= []).push({ entry: claim.entry });
        continue;
      }
      adding.set(destination, (adding.get(destination) ?? 0) + 1);
      ready.push(claim);
      readyTo.push(destination);
    }
    if (ready.length > 0 && kind.prepare) {
      try {
        await kind.prepare(ready.map((r) => r.job));
      } catch (err) {
        this.log.warn({ err, kind: kind.name }, 'could not read ahead what ready jobs need; their attempts read it');
      }
    }
    for (let i = 0; i < ready.length; i++) this.enqueue(pool, ready[i]!, readyTo[i]!);
    this.dispatch(pool);
    // What was parked freed no room: read on.
    if (aside.size > 0) fill.again = true;
    for (const [destination, items] of aside) {
      try {
        await kind.setAside!(
          items.map((i) => i.job),
          destination,
        );
      } catch (err) {
        this.log.error({ err, destination }, 'could not park the jobs of a destination that is down');
        for (const item of items) this.links.claims.skip(item, destination);
      }
      for (const item of items) this.links.claims.letGo(item);
      fill.fresh -= items.length;
    }
    // Nothing here could be taken: stop reading until a destination drains.
    if (past && ready.length === 0 && aside.size === 0) fill.stop = true;
    return past;
  }

  /** The SMTP dispatcher's figures (the operator's queue view of mail). */
  snapshot(nextWakeAt: number | null): QueueSnapshot {
    return this.pools.smtp.snapshot(nextWakeAt);
  }

  /** Every destination with jobs in memory or suspended, with its limits. */
  destinations(): EngineDestination[] {
    return describeDestinations(this.pools, this.states, this.shaping);
  }

  limitsOf(dispatcher: DispatcherName): DispatcherLimits {
    return this.pools[dispatcher].limits;
  }

  /** Asks the kinds that hand jobs over ahead to take back those of the destination not started. */
  private withdraw(destination: string): void {
    for (const kind of this.handingOff) kind.withdraw?.(destination);
  }

  /** Parks the ready jobs of a destination found down whose kind can park them; setAside takes the rest. */
  private park(pool: ReadyQueues, destination: string): void {
    const parked = new Map<JobKind, Claim[]>();
    for (const item of pool.takeParkable(destination)) {
      const list = parked.get(item.kind);
      if (list) list.push(item);
      else parked.set(item.kind, [item]);
    }
    for (const [kind, list] of parked) {
      // Held as taken until they are parked, so that no fill reads them meanwhile.
      void kind.setAside!(
        list.map((i) => i.job),
        destination,
      ).then(
        () => {
          for (const item of list) this.links.claims.letGo(item);
        },
        (err: unknown) => {
          this.log.error({ err, destination }, 'could not park the jobs of a destination that is down');
          for (const item of list) {
            this.links.claims.letGo(item);
            this.links.claims.skip(item, destination);
          }
        },
      );
    }
  }

  /** The ready jobs of a held destination (and of its lanes) are let go, not read again until it is no longer held. */
  private setAside(destination: string): void {
    for (const pool of Object.values(this.pools)) {
      for (const name of [...pool.ready.keys()]) {
        if (name !== destination && splitLane(name).destination !== destination) continue;
        for (const item of pool.takeAll(name) ?? []) {
          this.links.claims.letGo(item);
          this.links.claims.skip(item, name);
        }
      }
    }
  }

  private enqueue(pool: ReadyQueues, claim: Claim, destination: string): void {
    if (this.stopped) {
      this.links.claims.letGo(claim);
      return;
    }
    if (this.states.held(destination, this.clock.now())) {
      this.links.claims.letGo(claim);
      this.links.claims.skip(claim, destination);
      return;
    }
    pool.push(claim, destination);
  }

  /** Starts what the limits allow, round-robin over destinations. */
  private dispatch(pool: ReadyQueues): void {
    let wait: number | null = null;
    // At the total, only jobs handed over ahead can still go (to destinations at their concurrency).
    while (!this.stopped && this.canWrite && pool.readyCount > 0 && (pool.handsOff || pool.running < pool.limits.concurrency)) {
      let started = false;
      for (const [destination, list] of pool.ready) {
        if (!pool.handsOff && pool.running >= pool.limits.concurrency) break;
        const limits = this.states.limitsOf(destination);
        const concurrency = limits?.concurrency ?? pool.limits.perDestination;
        const handed = pool.runningPer.get(destination) ?? 0;
        // Within its concurrency a job counts against the total; past it (handOff) it waits in
        // the dispatcher for one of the destination's own slots, and does not.
        if (handed < concurrency ? pool.running >= pool.limits.concurrency : handed >= concurrency * (list[0]!.kind.handOff ?? 1)) continue;
        // A slot shared with other nodes first: a rate token taken for a job that cannot start would be lost.
        let exit: (() => void) | null = null;
        if (this.gate) {
          const entered = this.gate.enter(destination, concurrency);
          if (typeof entered === 'number') {
            wait = wait === null ? entered : Math.min(wait, entered);
            continue;
          }
          exit = entered;
        }
        if (limits?.rate) {
          const after = this.gate ? this.gate.take(destination, limits.rate) : this.states.take(destination, limits.rate);
          if (after > 0) {
            exit?.();
            wait = wait === null ? after : Math.min(wait, after);
            continue;
          }
        }
        const item = list.shift()!;
        pool.readyCount -= 1;
        if (pool.limits.perDestinationReady !== undefined && list.length < pool.limits.perDestinationReady / 2) {
          if (this.links.claims.uncap(destination, pool.limits.perDestinationReady - list.length)) this.links.wake();
        }
        // Move the destination to the back: the next one gets the next turn.
        pool.ready.delete(destination);
        if (list.length > 0) pool.ready.set(destination, list);
        this.run(pool, destination, concurrency, item, exit);
        started = true;
      }
      if (!started) break;
    }
    const waitMs = wait === null ? 0 : Math.max(Math.ceil(wait), 1);
    if (wait !== null && !this.stopped && (!this.rateTimer || performance.now() + waitMs < this.rateTimerAt)) {
      if (this.rateTimer) clearTimeout(this.rateTimer);
      this.rateTimerAt = performance.now() + waitMs;
      this.rateTimer = setTimeout(() => {
        this.rateTimer = null;
        this.dispatchAll();
      }, waitMs);
      this.rateTimer.unref();
    }
  }

  /**
   * Hands a job to its kind. The dispatcher's total counts what can be under way at once: of a
   * destination's jobs handed over, at most its concurrency (the rest wait in the dispatcher).
   */
  private run(pool: ReadyQueues, destination: string, concurrency: number, item: Claim, exit: (() => void) | null): void {
    pool.start(destination, concurrency);
    this.unfinished += 1;
    // The slot is freed when the attempt no longer uses a connection, not when its outcome is on
    // disk: a connection need not wait for an fsync. The job stays taken until then (its lease).
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      pool.release(destination, concurrency);
      exit?.();
      if (!this.stopped) this.dispatch(pool);
    };
    let ending: Ending = 'done';
    void item.kind
      .run(item.job, release, destination)
      .then((result) => {
        if (result === 'withdrawn') ending = 'withdrawn';
      })
      .catch((err: unknown) => {
        ending = 'failed';
        this.log.error({ err, job: item.ref }, 'job failed unexpectedly');
      })
      .finally(() => {
        release();
        this.unfinished -= 1;
        const readOn = this.links.claims.end(item, ending);
        if (this.unfinished === 0) for (const done of this.idle) done();
        if (this.stopped) return;
        // A withdrawn job is still due: read it again now (set aside while its destination is held).
        if (readOn) this.links.wake();
      });
  }
}
