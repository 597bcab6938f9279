import type { Logger } from 'pino';
import type pg from 'pg';
import type { EventsRepo } from '../store/events-repo.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { PgKv } from '../store/pg/kv.ts';
import type { EventRecord, MessageRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import type { Clock } from '../util/time.ts';
import { publish, type Batch } from './publication.ts';

/** Events published per transaction at most. */
export const PUBLISH_BATCH = 2000;
/** How long a landed event waits for others to share its transaction (unless a batch is full, or a read waits for it). */
export const PUBLISH_INTERVAL_MS = 1000;
/** Landed events kept in memory for the next batches; past this they are read back from the store. */
const BUFFER_LIMIT = 20_000;
/** Messages changed without an event, kept for the next batch at most (past this, changes wait for their next event). */
const CHANGED_LIMIT = 20_000;
/** How long a read waits for this node's events to be published before it answers with what is. */
const CATCH_UP_MS = 1000;
const RETRY_MIN_MS = 200;
const RETRY_MAX_MS = 5000;

export interface PublisherDeps {
  pool: pg.Pool;
  nodeId: string;
  /** The `published` table. */
  published: PgKv;
  /** Where messages changed without an event are heard of (Store.onPut). */
  store: Pick<Store, 'onPut'>;
  events: EventsRepo;
  /** This node's messages. */
  messages: MessagesRepo;
  clock: Clock;
  log: Logger;
  /** Whether events count in the cluster's statistics counters (statistics.counters). */
  counting: boolean;
}

/**
 * Cluster mode: each node publishes its messages, events and statistics counters to PostgreSQL,
 * for reads on any node (DESIGN.md §10). A consumer of this node's events outbox, as the webhook
 * fan-out is: it hears of events as their batches land and reads on from its cursor after a
 * restart. Events are published in batches (PUBLISH_BATCH, or what landed in PUBLISH_INTERVAL_MS),
 * each in one transaction with the cursor (cluster/publication.ts): a restart, or a crash between
 * the commit and this node learning of it, publishes nothing twice. The cursor is kept in the
 * database only.
 *
 * Messages changed without an event (a cancel, a hold, content dropped by retention) are heard
 * of through the store and published with the next batch; a crash before that leaves their
 * published record as it was until their next event.
 */
export class Publisher {
  /** The newest event published, as the database holds it (null: none yet). */
  private cursor: string | null = null;
  private buffer: EventRecord[] = [];
  /** Events landed that the buffer does not hold: read them back from the store. */
  private overflow = true;
  private readonly changed = new Set<string>();
  /** The newest event landed (what a read waits for). */
  private newestLanded: string | null = null;
  /** When the oldest event not yet published was made (null: none waits that is known of). */
  private oldestWaiting: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** A failed batch is tried again when its timer fires, not sooner. */
  private backingOff = false;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = true;
  private failures = 0;
  /** Batches begun (each takes the changed messages known then), and the last one done. */
  private begun = 0;
  private done = 0;
  private waiters: Waiter[] = [];
  private subscribed = false;
  /** Transactions committed and events published since the start (tests, metrics). */
  readonly stats = { batches: 0, events: 0 };

  constructor(private readonly deps: PublisherDeps) {}

  /** Reads the cursor from the database and publishes what this node's outbox holds after it. */
  async start(): Promise<void> {
    const { rows } = await this.deps.pool.query<{ cursor: string }>('SELECT cursor FROM publication WHERE node_id = $1', [this.deps.nodeId]);
    this.cursor = rows[0]?.cursor ?? null;
    this.stopped = false;
    this.overflow = true;
    this.buffer = [];
    if (!this.subscribed) {
      this.subscribed = true;
      this.deps.events.onLanded((event) => this.landed(event));
      this.deps.store.onPut('messages', (key) => this.messageChanged(key));
    }
    this.run();
  }

  /** Publishes what is left (for `graceMs` at most), then no more. */
  async stop(graceMs = 5000): Promise<void> {
    if (this.stopped) return;
    await this.caughtUp(graceMs);
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    let late: NodeJS.Timeout | undefined;
    await Promise.race([this.running, new Promise((resolve) => (late = setTimeout(resolve, graceMs)))]);
    clearTimeout(late);
    for (const waiter of this.waiters.splice(0)) waiter.done();
  }

  /**
   * Resolves once what this node recorded before the call is published (or after `maxMs`, or
   * at once when the publisher is not running): a read on this node then sees its own writes, as
   * a single node's reads do.
   */
  caughtUp(maxMs = CATCH_UP_MS): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const waiter: Waiter = {
      upTo: this.newestLanded,
      // Messages changed without an event are published by a batch begun after now.
      batch: this.changed.size > 0 ? this.begun + 1 : 0,
      done: () => undefined,
    };
    if (this.reached(waiter)) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => waiter.done(), maxMs);
      timer.unref();
      waiter.done = () => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve();
      };
      this.waiters.push(waiter);
      if (!this.backingOff) this.run();
    });
  }

  /**
   * The age in ms of the oldest event of this node not yet published (0: none waits): the
   * publication lag. While the outbox is read back after a restart or a failure it is an upper bound.
   */
  get lagMs(): number {
    return this.oldestWaiting === null ? 0 : Math.max(0, this.deps.clock.now() - this.oldestWaiting);
  }

  /** Whether what the waiter waits for is published. */
  private reached(waiter: Waiter): boolean {
    const published = waiter.upTo === null || (this.cursor !== null && this.cursor >= waiter.upTo);
    return published && this.done >= waiter.batch;
  }

  private settle(): void {
    for (const waiter of [...this.waiters]) if (this.reached(waiter)) waiter.done();
  }

  private landed(event: EventRecord): void {
    if (this.stopped) return;
    this.newestLanded = event.id;
    if (this.buffer.length >= BUFFER_LIMIT) {
      // Too many to hold: they are all in the store after the cursor.
      this.overflow = true;
      this.buffer = [];
    } else this.buffer.push(event);
    this.oldestWaiting ??= Date.parse(event.createdAt);
    this.soon();
  }

  private messageChanged(id: string): void {
    if (this.stopped || this.changed.size >= CHANGED_LIMIT) return;
    this.changed.add(id);
    this.soon();
  }

  /** A batch now when one is full, else after PUBLISH_INTERVAL_MS (after a failure: when the retry is due). */
  private soon(): void {
    if (this.backingOff) return;
    if (this.overflow || this.buffer.length >= PUBLISH_BATCH) this.run();
    else this.later(PUBLISH_INTERVAL_MS);
  }

  private later(ms: number): void {
    if (this.timer || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.backingOff = false;
      this.run();
    }, ms);
    this.timer.unref();
  }

  private run(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.backingOff = false;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.drain();
        } while (this.again && !this.stopped);
        if (this.failures > 0) this.deps.log.info({ node_id: this.deps.nodeId }, 'cluster publication resumed');
        this.failures = 0;
      } catch (err) {
        this.failures += 1;
        // Read back from the store: what failed, and whatever landed meanwhile.
        this.overflow = true;
        this.buffer = [];
        const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** (this.failures - 1));
        if (this.failures === 1 || delay === RETRY_MAX_MS) this.deps.log.warn({ err, retry_ms: delay }, 'cluster publication failed; trying again');
        this.later(delay);
        this.backingOff = true;
      } finally {
        this.running = null;
      }
    })();
  }

  /** Publishes batches while full ones wait (or a read waits); a partial batch only once its interval is up. */
  private async drain(): Promise<void> {
    for (;;) {
      const events = await this.next();
      const changed = [...this.changed];
      this.changed.clear();
      const batch = ++this.begun;
      if (events.length > 0 || changed.length > 0) {
        try {
          await this.publish(events, changed);
        } catch (err) {
          for (const id of changed) this.changed.add(id);
          throw err;
        }
      }
      this.done = batch;
      this.settle();
      if (events.length === 0 && changed.length === 0) return;
      const full = this.overflow || this.buffer.length >= PUBLISH_BATCH;
      if (!full && this.waiters.length === 0) {
        if (this.buffer.length > 0 || this.changed.size > 0) this.later(PUBLISH_INTERVAL_MS);
        return;
      }
    }
  }
  /** The next events after the cursor: from the buffer, or read back from the store. */
  private async next(): Promise<EventRecord[]> {
    const after = this.cursor;
    if (this.overflow) {
      const events = await this.deps.events.after(after, PUBLISH_BATCH);
      if (events.length < PUBLISH_BATCH) this.overflow = false;
      const last = events.at(-1)?.id ?? after;
      // Ids sort in the order their batches landed: what the buffer holds up to the last read was read.
      if (last !== null) this.buffer = this.buffer.filter((e) => e.id > last);
      if (events.length > 0) this.oldestWaiting ??= Date.parse(events[0]!.createdAt);
      return events;
    }
    const events = this.buffer.splice(0, PUBLISH_BATCH);
    return after === null ? events : events.filter((e) => e.id > after);
  }

  private async publish(events: EventRecord[], changed: string[]): Promise<void> {
    const { messages } = this.deps;
    const ids = new Set(changed);
    for (const e of events) if (e.type.startsWith('message.') && typeof e.data.id === 'string') ids.add(e.data.id);
    const list = [...ids];
    const found = await messages.getMany(list);
    const records = new Map<string, MessageRecord>();
    list.forEach((id, i) => {
      const record = found[i];
      if (record) records.set(id, record);
    });
    // A tracked message's links go with its first publication (its reception), for clicks on other nodes.
    const received = events.filter((e) => e.type === 'message.reception' && records.get(e.data.id as string)?.tracking.click);
    const links = new Map<string, string[]>();
    for (const e of received) {
      const found = await messages.links(e.data.id as string);
      if (found) links.set(e.data.id as string, found);
    }
    const batch: Batch = { events, records, links };
    const published = await publish(this.deps.pool, batch, { nodeId: this.deps.nodeId, published: this.deps.published, counting: this.deps.counting });
    this.stats.batches += 1;
    this.stats.events += published.events;
    if (published.cursor !== null && (this.cursor === null || published.cursor > this.cursor)) this.cursor = published.cursor;
    // The oldest event waiting now: the next in the buffer, or (read back from the store) at most as old as the last published.
    const nextWaiting = this.buffer.find((e) => this.cursor === null || e.id > this.cursor);
    if (nextWaiting) this.oldestWaiting = Date.parse(nextWaiting.createdAt);
    else this.oldestWaiting = this.overflow && events.length > 0 ? Date.parse(events.at(-1)!.createdAt) : null;
  }
}

/** A read waiting for this node's publication (Publisher.caughtUp). */
interface Waiter {
  /** The newest event landed when it began to wait (null: none). */
  upTo: string | null;
  /** The batch that must be done (0: none). */
  batch: number;
  done: () => void;
}
