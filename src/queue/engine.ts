import type { Logger } from 'pino';
import { after, fromTime, startOf, type DueEntry, type JobIndex, type JobKindName } from '../store/job-index.ts';
import type { Clock } from '../util/time.ts';

/** Records read from the store at once while filling the ready queues. */
const READ_AHEAD = 32;
/** Index entries read at once while filling the ready queues: at most, and at least. */
const PAGE = 512;
const MIN_PAGE = 16;
/**
 * Each kind's index is read again from its start at least this often (ms) while the engine reads
 * it, whatever its floor says: an entry that landed without the engine being told (every writer
 * tells it; this is the safety net) is taken within this time.
 */
const FULL_READ_MS = 5000;

export type DispatcherName = 'smtp' | 'http';

/**
 * A kind of job: which dispatcher runs it, how its record is read, where it goes (the
 * destination whose limits apply) and what one attempt is. The attempt writes its outcome (new
 * state, next due entry, events) in one batch, through its kind (`queue/outcomes.ts`, `queue/http-jobs.ts`).
 */
export interface JobKind<J = unknown> {
  readonly name: JobKindName;
  readonly dispatcher: DispatcherName;
  /** The job's record (`key`: its entry), or null when there is nothing to do (gone, or final): its entry is dropped. */
  load(id: string, key: string): Promise<J | null>;
  /** Optional: several records at once (in the order asked, with their entries' keys), cheaper than a load each. */
  loadMany?(ids: readonly string[], keys: readonly string[]): Promise<Array<J | null>>;
  /**
   * Optional: completes jobs read that go into a ready queue (reads what their attempt needs,
   * e.g. request bodies), once their destination is known to have room: jobs left on the index
   * or set aside are not completed. A job it cannot complete is run all the same (the attempt
   * reads what is missing).
   */
  prepare?(jobs: J[]): Promise<void>;
  /** When the record says the job is due; an entry at another time is stale and skipped. */
  dueMs(job: J): number;
  /** The destination whose limits apply: an MX set for SMTP, a URL origin for HTTP. */
  destination(job: J): Promise<string>;
  /**
   * One attempt and its outcome. `release` frees the slot once no connection is used any more.
   * 'withdrawn': no attempt was made and nothing written (see `withdraw`); the job is read again.
   * `destination` is the one it was filed under (for its log lines).
   */
  run(job: J, release: () => void, destination: string): Promise<void | 'withdrawn'>;
  /**
   * Optional: takes due jobs of a destination that is paused as down off the due-time index
   * (parks them in the store) so they are not read again and again while it is down. Without
   * it they are set aside in memory until the pause ends.
   */
  setAside?(jobs: J[], destination: string): Promise<void>;
  /**
   * Optional: jobs of this kind handed to the dispatcher at once per destination, as a multiple
   * of the destination's concurrency (default 1: the engine starts each job itself). Above 1 the
   * dispatcher keeps at most `concurrency` of them going and starts the next as soon as one
   * ends (the HTTP client queues requests per origin), so the destination's connections do not
   * wait for a turn of the engine while outcomes are written. Of a destination's jobs handed
   * over, the dispatcher's total `concurrency` counts those that can be under way (at most the
   * destination's concurrency); the others wait for the destination's own slots.
   */
  readonly handOff?: number;
  /**
   * With handOff: the jobs handed to the dispatcher for the destination that have not started
   * end at once, their run resolving 'withdrawn'. Asked when the destination is suspended or
   * paused as down, so that no more of them start.
   */
  withdraw?(destination: string): void;
}

export interface DispatcherLimits {
  /** Jobs in flight at once, in total for the dispatcher. */
  concurrency: number;
  /** Jobs in flight at once per destination, unless the destination has its own. */
  perDestination: number;
  /** Jobs held in memory (ready + in flight); the rest wait in the store. */
  readyLimit: number;
  /**
   * Ready jobs one destination may hold (default: no cap). Past it the destination's further due
   * jobs are left on the index until its queue has drained by half, so one slow destination
   * cannot fill the memory that the others' jobs need.
   */
  perDestinationReady?: number;
}

/** Limits the operator set for one destination (`delivery.destinations`). */
export interface DestinationLimits {
  concurrency?: number | undefined;
  /** Jobs started per second at most. */
  rate?: number | undefined;
}

export interface EngineOptions {
  dispatchers: Record<DispatcherName, DispatcherLimits>;
  destinations: Record<string, DestinationLimits>;
  /** Destinations suspended when the engine starts (kept in the store by the operator's commands). */
  suspended: Iterable<string>;
  /** How often each kind's index is read from its start at least (ms; default 5 s; tests). */
  fullReadMs?: number;
}

/** What is in memory now, for the operator. */
export interface QueueSnapshot {
  running: number;
  ready: number;
  destinations: Array<{ destination: string; ready: number; running: number }>;
  nextWakeAt: number | null;
}

export interface EngineDestination {
  destination: string;
  dispatcher: DispatcherName;
  kinds: JobKindName[];
  ready: number;
  running: number;
  concurrency: number;
  rate: number | null;
  suspended: boolean;
  /** Found down: no job starts before this time. */
  pausedUntil: number | null;
}

/** An entry to take, with its job when that is already read (left capped, it was). */
interface Visit {
  entry: DueEntry;
  job?: unknown;
}

interface Item {
  kind: JobKind;
  job: unknown;
  ref: string;
  /** Its entry on the index. */
  entry: DueEntry;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** One dispatcher's memory: ready queues per destination and what runs. */
class Pool {
  readonly ready = new Map<string, Item[]>();
  readonly runningPer = new Map<string, number>();
  readonly kindsPer = new Map<string, Set<JobKindName>>();
  readyCount = 0;
  /** Jobs in a transaction: what the limits count. */
  running = 0;
  /** Jobs taken and not finished (ready, running or recording an outcome). */
  taken = 0;
  /** More was due than fitted: read again when there is room. */
  backlog = false;
  /** Whether a kind of this dispatcher hands jobs over ahead (JobKind.handOff). */
  handsOff = false;
  constructor(readonly limits: DispatcherLimits) {}
}

/**
 * The one job engine: takes due jobs of every kind from the store's due-time index into bounded
 * ready queues per dispatcher and destination, and runs them within the dispatcher's, the
 * destination's concurrency and rate, and not at all while the destination is suspended.
 *
 * No polling scan: the index is read when something may be due (start, a new job, the timer
 * armed for the earliest future entry, room freed), from where the last read stopped. A taken
 * job keeps its entry on the index until its outcome moves or removes it in the outcome's batch:
 * that is the lease. After a crash the entry is still due and the job runs again; only attempts
 * in flight at the crash can be made twice.
 */
export class JobEngine {
  private readonly kinds = new Map<JobKindName, JobKind>();
  private readonly pools: Record<DispatcherName, Pool>;
  private readonly taken = new Set<string>();
  /** Taken jobs of suspended destinations are let go and not read again until resumed. */
  private readonly skipped = new Map<string, string>();
  /**
   * Due jobs left on the index because their destination holds its share of ready memory, by
   * destination (ref → entry, with the job as read: released, it is not read again).
   */
  private readonly capped = new Map<string, Map<string, Visit>>();
  /** The same, by job: which destination's share each waits for. */
  private readonly cappedRefs = new Map<string, string>();
  /**
   * Jobs whose outcome landed while the index was being read and its entries taken: the read
   * may still hold their entries, which are not loaded again (their record is gone or moved on).
   */
  private doneDuringFill: Set<string> | null = null;
  /** Destinations whose released jobs the next read has not taken yet. */
  private readonly uncapping = new Set<string>();
  private readonly suspended: Set<string>;
  /** Destinations found down, with when to try them again (the kind that found it decides). */
  private readonly paused = new Map<string, number>();
  private readonly buckets = new Map<string, Bucket>();
  /**
   * Per kind, where the next read of the index begins (absent: at the kind's start). Every
   * entry before it is known here (taken, skipped, left capped) or gone, so a fill does not read
   * past the jobs in memory again and again. An entry put before it moves it back (`notify`,
   * `lower`); one of those known let go while its entry stays is read again by key (`revisit`);
   * and now and then every kind is read from its start (`reread`).
   */
  private readonly floors = new Map<JobKindName, string>();
  /**
   * Entries before a floor that are known to be on the index and no longer held (released from
   * their cap, withdrawn, failed): the next fill reads them by key, not by reading the index again.
   */
  private readonly revisits = new Map<JobKindName, Map<string, Visit>>();
  /** Lowered while a fill of the kind was reading: where the fill's floor may go at most. */
  private readonly loweredDuringFill = new Map<JobKindName, string>();
  private fillingKind: JobKindName | null = null;
  private lastFullRead = 0;
  private unfinished = 0;
  private timer: NodeJS.Timeout | null = null;
  private wakeAt: number | null = null;
  private rateTimer: NodeJS.Timeout | null = null;
  private pumping: Promise<void> | null = null;
  private pumpAgain = false;
  private stopped = true;
  /** False while the store refuses writes: no attempt starts (its outcome could not be written). */
  private writable = true;
  private readonly idle = new Set<() => void>();

  constructor(
    private readonly index: JobIndex,
    private readonly options: EngineOptions,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.pools = { smtp: new Pool(options.dispatchers.smtp), http: new Pool(options.dispatchers.http) };
    this.suspended = new Set(options.suspended);
  }

  register<J>(kind: JobKind<J>): void {
    this.kinds.set(kind.name, kind as unknown as JobKind);
    if ((kind.handOff ?? 1) > 1) this.pools[kind.dispatcher].handsOff = true;
  }

  start(): void {
    this.stopped = false;
    this.reread();
    void this.pumpSoon();
  }

  /** A job became due at `dueMs` (new, retried, or moved by the operator), its entry written. */
  notify(dueMs: number): void {
    if (this.stopped) return;
    for (const kind of this.kinds.keys()) this.lower(kind, fromTime(kind, dueMs));
    if (dueMs <= this.clock.now()) void this.pumpSoon();
    else if (this.wakeAt === null || dueMs < this.wakeAt) this.arm(dueMs);
  }

  /** Reads what is due now, every kind's index from its start (the operator moved jobs; tests). */
  wake(): Promise<void> {
    this.reread();
    return this.pumpSoon();
  }

  /** The next read of the kind's index begins at `from` or before. */
  private lower(kind: JobKindName, from: string): void {
    const floor = this.floors.get(kind);
    if (floor !== undefined && from < floor) this.floors.set(kind, from);
    if (this.fillingKind === kind) {
      const lowered = this.loweredDuringFill.get(kind);
      if (lowered === undefined || from < lowered) this.loweredDuringFill.set(kind, from);
    }
  }

  /** The entry is on the index and held no more: the next fill takes it again (its job read again unless given). */
  private revisit(visit: Visit): void {
    let visits = this.revisits.get(visit.entry.kind);
    if (!visits) this.revisits.set(visit.entry.kind, (visits = new Map()));
    visits.set(visit.entry.key, visit);
  }

  /** The next read of every kind's index begins at its start. */
  private reread(): void {
    this.floors.clear();
    this.revisits.clear();
    if (this.fillingKind !== null) this.loweredDuringFill.set(this.fillingKind, startOf(this.fillingKind));
    this.lastFullRead = performance.now();
  }

  /** Reads what is due now (coalesced: one read at a time, one more if asked meanwhile). */
  private pumpSoon(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.pumping) {
      this.pumpAgain = true;
      return this.pumping;
    }
    this.pumping = (async () => {
      try {
        do {
          this.pumpAgain = false;
          await this.pump();
        } while (this.pumpAgain && !this.stopped);
      } catch (err) {
        this.log.error({ err }, 'job engine could not read the due-time index; retrying in 5 s');
        // A read cut short may have let go of entries it was revisiting: the retry reads everything.
        this.reread();
        this.arm(this.clock.now() + 5000);
      } finally {
        this.pumping = null;
      }
    })();
    return this.pumping;
  }

  /** Stops taking work and waits (up to `graceMs`) for attempts in flight and their outcomes. */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    this.disarm();
    if (this.rateTimer) clearTimeout(this.rateTimer);
    this.rateTimer = null;
    for (const pool of Object.values(this.pools)) {
      for (const items of pool.ready.values()) for (const item of items) this.let(pool, item.ref);
      pool.ready.clear();
      pool.readyCount = 0;
    }
    await this.pumping;
    if (this.unfinished === 0) return;
    await new Promise<void>((resolve) => {
      const timeout = setTimeout(resolve, graceMs);
      this.idle.add(() => {
        clearTimeout(timeout);
        resolve();
      });
    });
  }

  /**
   * The store refuses writes (false) or takes them again (true). While it refuses, no attempt
   * starts and the index is not read: a job run now could not record its outcome, and would be
   * run again, sent again. Attempts in flight finish; jobs handed to a dispatcher ahead and not
   * started are taken back. Ready jobs wait in memory.
   */
  storageWritable(ok: boolean): void {
    if (this.writable === ok) return;
    this.writable = ok;
    if (!ok) {
      this.disarm();
      for (const pool of Object.values(this.pools)) for (const destination of [...pool.runningPer.keys()]) this.withdraw(destination);
      return;
    }
    if (this.stopped) return;
    this.reread();
    for (const pool of Object.values(this.pools)) this.dispatch(pool);
    void this.pumpSoon();
  }

  /** Stops starting jobs for the destination; those in flight finish. */
  suspend(destination: string): void {
    this.suspended.add(destination);
    this.setAside(destination);
    this.withdraw(destination);
  }

  /**
   * Starts no job for the destination before `untilMs` (it was found down): its ready jobs are
   * parked by their kind (kind.setAside), as those read while the pause lasts are, or else go
   * back to the store and are read again once the pause is over.
   */
  pause(destination: string, untilMs: number): void {
    if ((this.paused.get(destination) ?? 0) >= untilMs) return;
    this.paused.set(destination, untilMs);
    for (const pool of Object.values(this.pools)) this.park(pool, destination);
    this.setAside(destination);
    this.withdraw(destination);
    this.notify(untilMs);
  }

  /** Asks the kinds that hand jobs over ahead to take back those of the destination not started. */
  private withdraw(destination: string): void {
    for (const kind of this.kinds.values()) if (kind.handOff !== undefined && kind.handOff > 1) kind.withdraw?.(destination);
  }

  /** Parks the ready jobs of a destination found down whose kind can park them; setAside takes the rest. */
  private park(pool: Pool, destination: string): void {
    const items = pool.ready.get(destination);
    if (!items) return;
    const parked = new Map<JobKind, Item[]>();
    for (const item of items) {
      if (!item.kind.setAside) continue;
      const list = parked.get(item.kind);
      if (list) list.push(item);
      else parked.set(item.kind, [item]);
    }
    if (parked.size === 0) return;
    const kept = items.filter((item) => !item.kind.setAside);
    if (kept.length > 0) pool.ready.set(destination, kept);
    else pool.ready.delete(destination);
    pool.readyCount -= items.length - kept.length;
    for (const [kind, list] of parked) {
      // Held as taken until they are parked, so that no fill reads them meanwhile.
      void kind.setAside!(list.map((i) => i.job), destination).then(
        () => {
          for (const { ref } of list) this.let(pool, ref);
        },
        (err: unknown) => {
          this.log.error({ err, destination }, 'could not park the jobs of a destination that is down');
          for (const { ref } of list) {
            this.let(pool, ref);
            this.skipped.set(ref, destination);
          }
        },
      );
    }
  }

  /** The destination answers again: its pause ends now. */
  unpause(destination: string): void {
    if (!this.paused.delete(destination)) return;
    if (!this.suspended.has(destination)) this.unskip(destination);
    void this.pumpSoon();
  }

  /** The jobs of the destination let go while it was held are read again. */
  private unskip(destination: string): void {
    let any = false;
    for (const [ref, dest] of this.skipped) {
      if (dest !== destination) continue;
      this.skipped.delete(ref);
      any = true;
    }
    if (any) this.reread();
  }

  private setAside(destination: string): void {
    for (const pool of Object.values(this.pools)) {
      const items = pool.ready.get(destination);
      if (!items) continue;
      pool.ready.delete(destination);
      pool.readyCount -= items.length;
      for (const item of items) {
        this.let(pool, item.ref);
        this.skipped.set(item.ref, destination);
      }
    }
  }

  resume(destination: string): void {
    if (!this.suspended.delete(destination)) return;
    this.unskip(destination);
    void this.pumpSoon();
  }

  /** Suspended by the operator, or paused as down. */
  private held(destination: string, now: number): boolean {
    return this.suspended.has(destination) || (this.paused.get(destination) ?? 0) > now;
  }

  /** Pauses that are over: their set-aside jobs may be read again. */
  private endPauses(now: number): void {
    for (const [destination, until] of this.paused) {
      if (until > now) continue;
      this.paused.delete(destination);
      if (this.suspended.has(destination)) continue;
      this.unskip(destination);
    }
  }

  /** The SMTP dispatcher's figures (the operator's queue view of mail). */
  snapshot(): QueueSnapshot {
    const pool = this.pools.smtp;
    const names = new Set([...pool.ready.keys(), ...pool.runningPer.keys()]);
    return {
      running: pool.running,
      ready: pool.readyCount,
      destinations: [...names].map((destination) => ({
        destination,
        ready: pool.ready.get(destination)?.length ?? 0,
        running: pool.runningPer.get(destination) ?? 0,
      })),
      nextWakeAt: this.wakeAt,
    };
  }

  /** Every destination with jobs in memory or suspended, with its limits. */
  destinations(): EngineDestination[] {
    const out: EngineDestination[] = [];
    for (const [dispatcher, pool] of Object.entries(this.pools) as Array<[DispatcherName, Pool]>) {
      for (const destination of new Set([...pool.ready.keys(), ...pool.runningPer.keys()])) {
        out.push(this.describe(dispatcher, pool, destination));
      }
    }
    for (const destination of [...this.suspended, ...this.paused.keys()]) {
      if (!out.some((d) => d.destination === destination)) out.push(this.describe(null, null, destination));
    }
    return out.sort((a, b) => a.destination.localeCompare(b.destination));
  }

  limitsOf(dispatcher: DispatcherName): DispatcherLimits {
    return this.pools[dispatcher].limits;
  }

  /** Whether the job is in memory (ready or in flight): its outcome is pending. */
  holds(kind: JobKindName, id: string): boolean {
    return this.taken.has(`${kind}:${id}`);
  }

  private describe(dispatcher: DispatcherName | null, pool: Pool | null, destination: string): EngineDestination {
    const limits = this.options.destinations[destination];
    const d = dispatcher ?? (destination.includes('://') ? 'http' : 'smtp');
    const concurrency = limits?.concurrency ?? this.pools[d].limits.perDestination;
    // Jobs handed to the dispatcher beyond the concurrency wait in its queue: shown as ready.
    const handed = pool?.runningPer.get(destination) ?? 0;
    const running = Math.min(handed, concurrency);
    return {
      destination,
      dispatcher: d,
      kinds: [...(pool?.kindsPer.get(destination) ?? [])],
      ready: (pool?.ready.get(destination)?.length ?? 0) + handed - running,
      running,
      concurrency,
      rate: limits?.rate ?? null,
      suspended: this.suspended.has(destination),
      pausedUntil: (this.paused.get(destination) ?? 0) > this.clock.now() ? this.paused.get(destination)! : null,
    };
  }

  private async pump(): Promise<void> {
    // Resumed by storageWritable(true), which reads everything again.
    if (!this.writable) return;
    const now = this.clock.now();
    this.endPauses(now);
    if (performance.now() - this.lastFullRead >= (this.options.fullReadMs ?? FULL_READ_MS)) this.reread();
    let next: number | null = null;
    for (const kind of this.kinds.values()) {
      await this.fill(kind, now);
      const due = await this.index.nextDue(kind.name, now);
      if (due !== null && (next === null || due < next)) next = due;
    }
    if (next !== null) this.arm(next);
    else this.disarm();
  }

  /** Takes due jobs of one kind into its dispatcher's ready queues, as far as there is room. */
  private async fill(kind: JobKind, now: number): Promise<void> {
    const pool = this.pools[kind.dispatcher];
    const room = pool.limits.readyLimit - pool.taken;
    if (room <= 0) {
      pool.backlog = true;
      return;
    }
    // Taken and suspended jobs are still on the index: read past them.
    // What was released before this read is read now.
    this.uncapping.clear();
    const done = new Set<string>();
    this.doneDuringFill = done;
    this.fillingKind = kind.name;
    this.loweredDuringFill.delete(kind.name);
    const from = this.floors.get(kind.name) ?? startOf(kind.name);
    let floor = from;
    try {
      floor = await this.fillFrom(kind, pool, now, room, done, from);
    } finally {
      this.doneDuringFill = null;
      this.fillingKind = null;
      const lowered = this.loweredDuringFill.get(kind.name);
      this.loweredDuringFill.delete(kind.name);
      if (lowered !== undefined && lowered < floor) floor = lowered;
      if (floor <= startOf(kind.name)) this.floors.delete(kind.name);
      else this.floors.set(kind.name, floor);
    }
  }

  /**
   * Takes what there is room for: first the entries to revisit, then the kind's due entries from
   * `from` on, page by page. Returns the new floor: the first entry read that is neither known
   * here nor gone (left on the index unremembered, or not reached), else past the last one read.
   */
  private async fillFrom(kind: JobKind, pool: Pool, now: number, room: number, done: Set<string>, from: string): Promise<string> {
    const state = { fresh: 0, stop: false };
    const revisit = this.revisits.get(kind.name);
    if (revisit && revisit.size > 0) {
      const visits = [...revisit.values()].filter((v) => v.entry.dueMs <= now).sort(byKey);
      for (const v of visits) revisit.delete(v.entry.key);
      for (const v of await this.takeEntries(kind, pool, now, room, done, visits, state)) this.revisit(v);
    }
    let floor = from;
    while (!state.stop && state.fresh < room && !this.stopped) {
      // No more than there is room for (and some over, for entries known here): with a backlog
      // behind a full ready queue, each read takes the few freed slots' worth, not a full page.
      const limit = Math.min(PAGE, Math.max(MIN_PAGE, 2 * (room - state.fresh)));
      const page = await this.index.due(kind.name, now, limit, floor);
      if (page.length === 0) break;
      const [left] = await this.takeEntries(kind, pool, now, room, done, page.map((entry) => ({ entry })), state);
      if (left) {
        floor = left.entry.key;
        break;
      }
      floor = after(page[page.length - 1]!.key);
      if (page.length < limit) break;
    }
    pool.backlog = state.fresh >= room;
    return floor;
  }

  /**
   * Takes the jobs of these entries (in key order) into the ready queues, as far as there is
   * room; returns the entries not dealt with (left on the index unremembered, or not reached),
   * in key order. `state.stop`: nothing more can be taken until a destination drains.
   */
  private async takeEntries(kind: JobKind, pool: Pool, now: number, room: number, done: Set<string>, all: Visit[], state: { fresh: number; stop: boolean }): Promise<Visit[]> {
    const entries = all.filter(({ entry }) => {
      const ref = `${kind.name}:${entry.id}`;
      return !this.taken.has(ref) && !this.skipped.has(ref) && !this.cappedRefs.has(ref) && !done.has(ref);
    });
    const left: Visit[] = [];
    // Read a few records at once and start what can start after each read: the first attempts
    // do not wait for the whole batch, and the reads overlap in the thread pool.
    let at = 0;
    while (at < entries.length && state.fresh < room && !this.stopped && !state.stop) {
      const slice = entries.slice(at, at + Math.min(READ_AHEAD, room - state.fresh));
      at += slice.length;
      const jobs = await this.load(kind, slice);
      const found: Array<{ job: unknown; ref: string; entry: DueEntry }> = [];
      for (const [i, visit] of slice.entries()) {
        const job = jobs[i];
        const entry = visit.entry;
        const ref = `${kind.name}:${entry.id}`;
        if (this.stopped) {
          left.push(visit);
          continue;
        }
        if (this.taken.has(ref) || done.has(ref)) continue;
        if (job === null || job === undefined) {
          // Nothing to do (purged, or finished by a change that raced this read): the entry goes.
          this.log.debug({ kind: kind.name, id: entry.id }, 'dropping a due-time entry with nothing to do');
          await this.index.drop(entry.key);
          continue;
        }
        // Its outcome moved it on since the index was read: not due any more.
        if (kind.dueMs(job) > now) continue;
        this.taken.add(ref);
        pool.taken += 1;
        found.push({ job, ref, entry });
        state.fresh += 1;
      }
      const destinations = await Promise.all(found.map(({ job }) => kind.destination(job).catch(() => 'unknown')));
      const aside = new Map<string, Array<{ job: unknown; ref: string }>>();
      const ready: Array<{ job: unknown; ref: string; entry: DueEntry; destination: string }> = [];
      /** How many of each destination this slice adds to its ready queue. */
      const adding = new Map<string, number>();
      let lookedPast = false;
      for (const [i, { job, ref, entry }] of found.entries()) {
        const destination = destinations[i]!;
        if (kind.setAside && !this.suspended.has(destination) && (this.paused.get(destination) ?? 0) > now) {
          const list = aside.get(destination);
          if (list) list.push({ job, ref });
          else aside.set(destination, [{ job, ref }]);
          continue;
        }
        const queued = (pool.ready.get(destination)?.length ?? 0) + (adding.get(destination) ?? 0);
        if (pool.limits.perDestinationReady !== undefined && queued >= pool.limits.perDestinationReady) {
          // Its share of memory is full: left on the index, and not read again until it drains.
          this.let(pool, ref);
          state.fresh -= 1;
          // Remembered up to a bound (the ready limit): past it, reading on for other
          // destinations would read this one's backlog again and again; it waits.
          if (this.cappedRefs.size < pool.limits.readyLimit) {
            this.cap(destination, ref, { entry, job });
            this.pumpAgain = true;
          } else {
            lookedPast = true;
            left.push({ entry });
          }
          continue;
        }
        adding.set(destination, (adding.get(destination) ?? 0) + 1);
        ready.push({ job, ref, entry, destination });
      }
      if (ready.length > 0 && kind.prepare) {
        try {
          await kind.prepare(ready.map((r) => r.job));
        } catch (err) {
          this.log.warn({ err, kind: kind.name }, 'could not read ahead what ready jobs need; their attempts read it');
        }
      }
      for (const { job, ref, entry, destination } of ready) this.enqueue(pool, kind, job, ref, entry, destination);
      this.dispatch(pool);
      // What was parked freed no room: read on.
      if (aside.size > 0) this.pumpAgain = true;
      for (const [destination, items] of aside) {
        try {
          await kind.setAside!(items.map((i) => i.job), destination);
        } catch (err) {
          this.log.error({ err, destination }, 'could not park the jobs of a destination that is down');
          for (const { ref } of items) this.skipped.set(ref, destination);
        }
        for (const { ref } of items) this.let(pool, ref);
        state.fresh -= items.length;
      }
      // Nothing here could be taken: stop reading until a destination drains.
      if (lookedPast && ready.length === 0 && aside.size === 0) state.stop = true;
    }
    left.push(...entries.slice(at));
    return left.sort(byKey);
  }

  /** The jobs of these entries: those not read yet in one read (loadMany) or a read each. */
  private async load(kind: JobKind, visits: Visit[]): Promise<unknown[]> {
    const unread = visits.filter((v) => v.job === undefined).map((v) => v.entry);
    if (unread.length === 0) return visits.map((v) => v.job);
    const read = kind.loadMany ? await kind.loadMany(unread.map((e) => e.id), unread.map((e) => e.key)) : await Promise.all(unread.map((e) => kind.load(e.id, e.key)));
    let next = 0;
    return visits.map((v) => (v.job === undefined ? read[next++] : v.job));
  }

  private enqueue(pool: Pool, kind: JobKind, job: unknown, ref: string, entry: DueEntry, destination: string): void {
    if (this.stopped) {
      this.let(pool, ref);
      return;
    }
    if (this.held(destination, this.clock.now())) {
      this.let(pool, ref);
      this.skipped.set(ref, destination);
      return;
    }
    const list = pool.ready.get(destination) ?? [];
    list.push({ kind, job, ref, entry });
    pool.ready.set(destination, list);
    pool.readyCount += 1;
    const kinds = pool.kindsPer.get(destination) ?? new Set();
    kinds.add(kind.name);
    pool.kindsPer.set(destination, kinds);
  }

  private cap(destination: string, ref: string, visit: Visit): void {
    if (this.cappedRefs.has(ref)) return;
    const refs = this.capped.get(destination) ?? new Map<string, Visit>();
    refs.set(ref, visit);
    this.capped.set(destination, refs);
    this.cappedRefs.set(ref, destination);
  }

  /**
   * The destination's queue has room again: as many of its jobs left on the index as it has
   * room for are read again, the earliest first (the others stay left, and are not read again
   * until there is room for them: a backlog of one destination is read once, not once per turn).
   */
  private uncap(destination: string, room: number): void {
    const refs = this.capped.get(destination);
    if (!refs || this.uncapping.has(destination)) return;
    let released = 0;
    for (const [ref, visit] of refs) {
      if (released >= room) break;
      refs.delete(ref);
      this.cappedRefs.delete(ref);
      this.revisit(visit);
      released += 1;
    }
    if (refs.size === 0) this.capped.delete(destination);
    // Until the next read has taken them, released jobs are not counted as room again.
    this.uncapping.add(destination);
    void this.pumpSoon();
  }

  /** Lets a taken job go without running it (its entry stays on the index). */
  private let(pool: Pool, ref: string): void {
    if (this.taken.delete(ref)) pool.taken -= 1;
  }

  /** Starts what the limits allow, round-robin over destinations. */
  private dispatch(pool: Pool): void {
    let wait: number | null = null;
    // At the total, only jobs handed over ahead can still go (to destinations at their concurrency).
    while (!this.stopped && this.writable && pool.readyCount > 0 && (pool.handsOff || pool.running < pool.limits.concurrency)) {
      let started = false;
      for (const [destination, list] of pool.ready) {
        if (!pool.handsOff && pool.running >= pool.limits.concurrency) break;
        const limits = this.options.destinations[destination];
        const concurrency = limits?.concurrency ?? pool.limits.perDestination;
        const handed = pool.runningPer.get(destination) ?? 0;
        // Within its concurrency a job counts against the total; past it (handOff) it waits in
        // the dispatcher for one of the destination's own slots, and does not.
        if (handed < concurrency ? pool.running >= pool.limits.concurrency : handed >= concurrency * (list[0]!.kind.handOff ?? 1)) continue;
        if (limits?.rate) {
          const after = this.take(destination, limits.rate);
          if (after > 0) {
            wait = wait === null ? after : Math.min(wait, after);
            continue;
          }
        }
        const item = list.shift()!;
        pool.readyCount -= 1;
        if (pool.limits.perDestinationReady !== undefined && list.length < pool.limits.perDestinationReady / 2) this.uncap(destination, pool.limits.perDestinationReady - list.length);
        // Move the destination to the back: the next one gets the next turn.
        pool.ready.delete(destination);
        if (list.length > 0) pool.ready.set(destination, list);
        this.run(pool, destination, concurrency, item);
        started = true;
      }
      if (!started) break;
    }
    if (wait !== null && !this.rateTimer && !this.stopped) {
      this.rateTimer = setTimeout(() => {
        this.rateTimer = null;
        for (const p of Object.values(this.pools)) this.dispatch(p);
      }, Math.max(Math.ceil(wait), 1));
      this.rateTimer.unref();
    }
  }

  /** Takes a token of the destination's rate: 0 when taken, else the ms until one is there. */
  private take(destination: string, rate: number): number {
    const now = this.clock.now();
    const bucket = this.buckets.get(destination) ?? { tokens: Math.max(rate, 1), at: now };
    bucket.tokens = Math.min(Math.max(rate, 1), bucket.tokens + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    this.buckets.set(destination, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return ((1 - bucket.tokens) / rate) * 1000;
  }

  /**
   * Hands a job to its kind. The dispatcher's total counts what can be under way at once: of a
   * destination's jobs handed over, at most its concurrency (the rest wait in the dispatcher).
   */
  private run(pool: Pool, destination: string, concurrency: number, item: Item): void {
    const handed = pool.runningPer.get(destination) ?? 0;
    if (handed < concurrency) pool.running += 1;
    this.unfinished += 1;
    pool.runningPer.set(destination, handed + 1);
    // The slot is freed when the attempt no longer uses a connection, not when its outcome is on
    // disk: a connection need not wait for an fsync. The job stays taken until then (its lease).
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      const left = (pool.runningPer.get(destination) ?? 1) - 1;
      if (left < concurrency) pool.running -= 1;
      if (left === 0) {
        pool.runningPer.delete(destination);
        if (!pool.ready.has(destination)) pool.kindsPer.delete(destination);
      } else pool.runningPer.set(destination, left);
      if (!this.stopped) this.dispatch(pool);
    };
    let again = false;
    let failed = false;
    void item.kind
      .run(item.job, release, destination)
      .then((result) => {
        again = result === 'withdrawn';
      })
      .catch((err: unknown) => {
        failed = true;
        this.log.error({ err, job: item.ref }, 'job failed unexpectedly');
      })
      .finally(() => {
        release();
        this.unfinished -= 1;
        this.let(pool, item.ref);
        // Its entry is still on the index (withdrawn: not attempted; failed: perhaps no outcome written): read again.
        if (again || failed) this.revisit({ entry: item.entry });
        if (!again) this.doneDuringFill?.add(item.ref);
        if (this.unfinished === 0) for (const done of this.idle) done();
        if (this.stopped) return;
        // A withdrawn job is still due: read it again now (set aside while its destination is held).
        if (again || (pool.backlog && pool.taken < pool.limits.readyLimit / 2)) void this.pumpSoon();
      });
  }

  private arm(atMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.wakeAt = atMs;
    // Timers are capped so a changed clock is noticed within a minute.
    const delay = Math.min(Math.max(atMs - this.clock.now(), 0), 60_000);
    // Entries due in the future sort after every floor (a read stops at what is due now), so
    // the wake reads on from the floors, not from the start: under load, entries written a
    // millisecond after a read began arm this timer again and again.
    this.timer = setTimeout(() => {
      this.timer = null;
      this.wakeAt = null;
      void this.pumpSoon();
    }, delay);
    this.timer.unref();
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.wakeAt = null;
  }
}

function byKey(a: Visit, b: Visit): number {
  return a.entry.key < b.entry.key ? -1 : 1;
}
