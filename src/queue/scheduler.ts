import type { Logger } from 'pino';
import { isFinal } from '../message/retention.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageRecord } from '../store/records.ts';
import { domainOf } from '../util/email.ts';
import type { Clock } from '../util/time.ts';

/** Records read from the store at once while filling the ready queues. */
const READ_AHEAD = 32;

export interface SchedulerOptions {
  /** Transactions in flight at once, in total. */
  concurrency: number;
  /** Transactions in flight at once per destination. */
  perDestination: number;
  /** Messages held in memory (ready + in flight); the rest wait in the store. */
  readyLimit: number;
}

/** What is in memory now, for the operator. */
export interface QueueSnapshot {
  running: number;
  ready: number;
  destinations: Array<{ destination: string; ready: number; running: number }>;
  nextWakeAt: number | null;
}

/**
 * Takes due work from the store's due-time index into bounded in-memory ready queues per
 * destination (recipient domain) and runs it within the global and per-destination limits.
 *
 * No polling scan: the store is read when something may be due (start, a new acceptance, the
 * timer armed for the earliest future entry, room freed in the queues). A taken message keeps
 * its entry on the index until its outcome moves or removes it in the outcome's batch: that is
 * the lease. After a crash the entry is still due and the work resumes; only transactions in
 * flight at the crash can be delivered twice.
 */
export class Scheduler {
  private readonly taken = new Set<string>();
  private readonly ready = new Map<string, MessageRecord[]>();
  private readonly runningPer = new Map<string, number>();
  private readyCount = 0;
  /** SMTP transactions in flight: what the limits count. */
  private running = 0;
  /** Messages started and not finished: in a transaction, or recording its outcome. */
  private unfinished = 0;
  private timer: NodeJS.Timeout | null = null;
  private wakeAt: number | null = null;
  private pumping: Promise<void> | null = null;
  private pumpAgain = false;
  /** More was due than fitted: read again when the queues have room. */
  private backlog = false;
  private stopped = false;
  private readonly idle = new Set<() => void>();

  constructor(
    private readonly repo: MessagesRepo,
    /**
     * Handles one message; calls `transactionDone` once it no longer uses a connection (the
     * outcome is then being recorded), which frees its slot for the next message.
     */
    private readonly process: (message: MessageRecord, transactionDone: () => void) => Promise<void>,
    private readonly options: SchedulerOptions,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.stopped = false;
    this.wake();
  }

  /** A message became due at `dueMs` (just accepted, or retried by the operator). */
  notify(dueMs: number): void {
    if (this.stopped) return;
    if (dueMs <= this.clock.now()) this.wake();
    else if (this.wakeAt === null || dueMs < this.wakeAt) this.arm(dueMs);
  }

  /** Reads what is due now (coalesced: one read at a time, one more if asked meanwhile). */
  wake(): Promise<void> {
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
        this.log.error({ err }, 'scheduler could not read the due-time index; retrying in 5 s');
        this.arm(this.clock.now() + 5000);
      } finally {
        this.pumping = null;
      }
    })();
    return this.pumping;
  }

  /** Stops taking work and waits (up to `graceMs`) for transactions in flight and their outcomes. */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.ready.clear();
    for (const id of [...this.taken]) if (!this.isRunning(id)) this.taken.delete(id);
    this.readyCount = 0;
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

  snapshot(): QueueSnapshot {
    const names = new Set([...this.ready.keys(), ...this.runningPer.keys()]);
    return {
      running: this.running,
      ready: this.readyCount,
      destinations: [...names].map((destination) => ({
        destination,
        ready: this.ready.get(destination)?.length ?? 0,
        running: this.runningPer.get(destination) ?? 0,
      })),
      nextWakeAt: this.wakeAt,
    };
  }

  /** Whether the message is in memory (ready or in flight): its outcome is pending. */
  holds(id: string): boolean {
    return this.taken.has(id);
  }

  private readonly runningIds = new Set<string>();
  private isRunning(id: string): boolean {
    return this.runningIds.has(id);
  }

  private async pump(): Promise<void> {
    const now = this.clock.now();
    const room = this.options.readyLimit - this.taken.size;
    if (room <= 0) {
      this.backlog = true;
      return;
    }
    // Entries already taken are still on the index (their lease): read past them.
    const entries = (await this.repo.due(now, room + this.taken.size)).filter(({ id }) => !this.taken.has(id));
    let fresh = 0;
    // Read a few records at once and start what can start after each read: the first
    // deliveries do not wait for the whole batch, and the reads overlap in the thread pool.
    for (let at = 0; at < entries.length && fresh < room && !this.stopped; ) {
      const slice = entries.slice(at, at + Math.min(READ_AHEAD, room - fresh));
      at += slice.length;
      const messages = await Promise.all(slice.map(({ id }) => this.repo.get(id)));
      for (const [i, { key, id }] of slice.entries()) {
        const message = messages[i];
        if (this.stopped || this.taken.has(id)) continue;
        if (!message || isFinal(message.status)) {
          // Nothing to deliver (purged, or finished by a change that raced this read): the entry goes.
          this.log.warn({ message_id: id, status: message?.status ?? null }, 'dropping a due-time entry with nothing to deliver');
          await this.repo.dropDue(key);
          continue;
        }
        // Its outcome moved it on since the index was read: not due any more.
        if (Date.parse(message.dueAt) > now) continue;
        this.taken.add(id);
        this.enqueue(message);
        fresh += 1;
      }
      this.dispatch();
    }
    this.backlog = fresh >= room;
    const next = await this.repo.nextDue(now);
    if (next !== null) this.arm(next);
    else this.disarm();
    this.dispatch();
  }

  private enqueue(message: MessageRecord): void {
    const destination = domainOf(message.recipient);
    const list = this.ready.get(destination) ?? [];
    list.push(message);
    this.ready.set(destination, list);
    this.readyCount += 1;
  }

  /** Starts what the limits allow, round-robin over destinations. */
  private dispatch(): void {
    while (!this.stopped && this.running < this.options.concurrency && this.readyCount > 0) {
      let started = false;
      for (const [destination, list] of this.ready) {
        if (this.running >= this.options.concurrency) break;
        if ((this.runningPer.get(destination) ?? 0) >= this.options.perDestination) continue;
        const message = list.shift()!;
        this.readyCount -= 1;
        // Move the destination to the back: the next one gets the next turn.
        this.ready.delete(destination);
        if (list.length > 0) this.ready.set(destination, list);
        this.run(destination, message);
        started = true;
      }
      if (!started) break;
    }
  }

  private run(destination: string, message: MessageRecord): void {
    this.running += 1;
    this.unfinished += 1;
    this.runningIds.add(message.id);
    this.runningPer.set(destination, (this.runningPer.get(destination) ?? 0) + 1);
    // The slot is freed when the transaction is over, not when its outcome is on disk: a
    // connection need not wait for an fsync. The message stays taken until then (its lease).
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.running -= 1;
      const left = (this.runningPer.get(destination) ?? 1) - 1;
      if (left === 0) this.runningPer.delete(destination);
      else this.runningPer.set(destination, left);
      if (!this.stopped) this.dispatch();
    };
    void this.process(message, release)
      .catch((err: unknown) => this.log.error({ err, message_id: message.id }, 'delivery failed unexpectedly'))
      .finally(() => {
        release();
        this.unfinished -= 1;
        this.runningIds.delete(message.id);
        this.taken.delete(message.id);
        if (this.unfinished === 0) for (const done of this.idle) done();
        if (this.stopped) return;
        if (this.backlog && this.taken.size < this.options.readyLimit / 2) void this.wake();
      });
  }

  private arm(atMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.wakeAt = atMs;
    // Timers are capped so a changed clock is noticed within a minute.
    const delay = Math.min(Math.max(atMs - this.clock.now(), 0), 60_000);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.wakeAt = null;
      void this.wake();
    }, delay);
    this.timer.unref();
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.wakeAt = null;
  }
}
