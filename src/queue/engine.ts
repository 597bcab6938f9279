import type { Logger } from 'pino';
import type { JobIndex, JobKindName } from '../store/job-index.ts';
import type { DestinationGate } from '../cluster/destination-gate.ts';
import type { Clock } from '../util/time.ts';
import { Dispatcher } from './dispatcher.ts';
import type { EngineDestination } from './engine-view.ts';
import { IndexReader } from './index-reader.ts';
import type { DestinationLimits, DispatcherLimits, DispatcherName, JobKind } from './job-kind.ts';
import type { QueueSnapshot } from './ready-queues.ts';
import type { LaneLimits } from './shaping/lane-shaping.ts';

export type { DestinationLimits, DispatcherLimits, DispatcherName, JobKind } from './job-kind.ts';
export type { EngineDestination } from './engine-view.ts';
export type { QueueSnapshot } from './ready-queues.ts';

export interface EngineOptions {
  dispatchers: Record<DispatcherName, DispatcherLimits>;
  destinations: Record<string, DestinationLimits>;
  /** Destinations suspended when the engine starts (kept in the store by the operator's commands). */
  suspended: Iterable<string>;
  /** Rate tokens and slots shared with other nodes (cluster/destination-gate.ts); none on one node. */
  gate?: DestinationGate | undefined;
  /** Traffic shaping (queue/shaping/): limits per lane, and the throttles replies put on lanes. */
  shaping?: LaneLimits | undefined;
  /** How often each kind's index is read from its start at least (ms; default 5 s; tests). */
  fullReadMs?: number;
}

/**
 * The one job engine: takes due jobs of every kind from the store's due-time index into bounded
 * ready queues per dispatcher and destination, and runs them within the dispatcher's, the
 * destination's concurrency and rate, and not at all while the destination is suspended.
 * Two halves: the index reader (queue/index-reader.ts) takes due jobs off the index, the
 * dispatcher (queue/dispatcher.ts) files them under their destinations and runs them. The
 * engine decides when the index is read.
 *
 * No polling scan: the index is read when something may be due (start, a new job, the timer
 * armed for the earliest future entry, room freed), from where the last read stopped. A taken
 * job keeps its entry on the index until its outcome moves or removes it in the outcome's batch:
 * that is the lease. After a crash the entry is still due and the job runs again; only attempts
 * in flight at the crash can be made twice.
 */
export class JobEngine {
  private readonly kinds = new Map<JobKindName, JobKind>();
  private readonly reader: IndexReader;
  private readonly dispatcher: Dispatcher;
  private timer: NodeJS.Timeout | null = null;
  private wakeAt: number | null = null;
  private pumping: Promise<void> | null = null;
  private pumpAgain = false;
  private stopped = true;

  constructor(
    private readonly index: JobIndex,
    options: EngineOptions,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.reader = new IndexReader(index, this.kinds, options, log);
    this.dispatcher = new Dispatcher(options, clock, log, { claims: this.reader, wake: () => void this.pumpSoon() });
  }

  register<J>(kind: JobKind<J>): void {
    this.kinds.set(kind.name, kind);
    this.dispatcher.register(kind);
  }

  start(): void {
    this.stopped = false;
    this.reader.start();
    this.dispatcher.start();
    void this.pumpSoon();
  }

  /** A job became due at `dueMs` (new, retried, or moved by the operator), its entry written. */
  notify(dueMs: number): void {
    if (this.stopped) return;
    this.reader.notify(dueMs);
    if (dueMs <= this.clock.now()) void this.pumpSoon();
    else if (this.wakeAt === null || dueMs < this.wakeAt) this.arm(dueMs);
  }

  /** Reads what is due now, every kind's index from its start (the operator moved jobs; tests). */
  wake(): Promise<void> {
    this.reader.reread();
    return this.pumpSoon();
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
        this.reader.reread();
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
    this.reader.stop();
    this.disarm();
    this.dispatcher.stop();
    await this.pumping;
    await this.dispatcher.settled(graceMs);
  }

  /**
   * The store refuses writes (false) or takes them again (true). While it refuses, no attempt
   * starts and the index is not read: a job run now could not record its outcome, and would be
   * run again, sent again. Attempts in flight finish; jobs handed to a dispatcher ahead and not
   * started are taken back. Ready jobs wait in memory.
   */
  storageWritable(ok: boolean): void {
    if (this.dispatcher.writable === ok) return;
    if (!ok) this.disarm();
    this.dispatcher.storageWritable(ok);
    if (!ok || this.stopped) return;
    this.reader.reread();
    this.dispatcher.dispatchAll();
    void this.pumpSoon();
  }

  /** Stops starting jobs for the destination; those in flight finish. */
  suspend(destination: string): void {
    this.dispatcher.suspend(destination);
  }

  /**
   * Starts no job for the destination before `untilMs` (it was found down): its ready jobs are
   * parked by their kind (kind.setAside), as those read while the pause lasts are, or else go
   * back to the store and are read again once the pause is over.
   */
  pause(destination: string, untilMs: number): void {
    if (this.dispatcher.pause(destination, untilMs)) this.notify(untilMs);
  }

  /** The destination answers again: its pause ends now. */
  unpause(destination: string): void {
    if (this.dispatcher.unpause(destination)) void this.pumpSoon();
  }

  resume(destination: string): void {
    if (this.dispatcher.resume(destination)) void this.pumpSoon();
  }

  /** The SMTP dispatcher's figures (the operator's queue view of mail). */
  snapshot(): QueueSnapshot {
    return this.dispatcher.snapshot(this.wakeAt);
  }

  /** Every destination with jobs in memory or suspended, with its limits. */
  destinations(): EngineDestination[] {
    return this.dispatcher.destinations();
  }

  limitsOf(dispatcher: DispatcherName): DispatcherLimits {
    return this.dispatcher.limitsOf(dispatcher);
  }

  /** Whether the job is in memory (ready or in flight): its outcome is pending. */
  holds(kind: JobKindName, id: string): boolean {
    return this.reader.holds(kind, id);
  }

  private async pump(): Promise<void> {
    // Resumed by storageWritable(true), which reads everything again.
    if (!this.dispatcher.writable) return;
    const now = this.clock.now();
    this.dispatcher.endPauses(now);
    const { again, next } = await this.reader.read(now, this.dispatcher);
    if (again) this.pumpAgain = true;
    if (next !== null) this.arm(next);
    else this.disarm();
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
