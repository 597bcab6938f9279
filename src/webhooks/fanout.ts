import type { Logger } from 'pino';
import type { EventsRepo } from '../store/events-repo.ts';
import type { WriteOp } from '../store/group-commit.ts';
import { newJob, type JobsRepo } from '../store/jobs-repo.ts';
import type { MetaRepo } from '../store/meta.ts';
import type { EventRecord, JobRecord, WebhookRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { Lru } from '../util/lru.ts';
import type { Clock } from '../util/time.ts';
import { FLAG_OF_EVENT, wants } from './payload.ts';
import type { Webhooks } from './webhooks.ts';
import type { RecentEvents } from './recent-events.ts';

/** The consumer's name on the events outbox. */
export const FANOUT_CONSUMER = 'webhooks';
/** Events turned into jobs per batch (one synced commit). */
const BATCH = 500;
/**
 * Events passed over without a job before the cursor is written anyway: a batch with no job
 * writes nothing (a request that produced no job leaves the store as it was), and a restart
 * reads back at most this many events.
 */
const CURSOR_LAG = 10_000;
/** Landed events kept in memory for the next batch; past this they are read back from the store. */
const BUFFER_LIMIT = 10_000;

/**
 * The webhook fan-out: a consumer of the events outbox. Every landed event that a webhook wants
 * becomes one delivery job per webhook, written with the consumer's cursor in one synced batch,
 * and the engine is told. It hears of events when their batch lands (no polling); after a
 * restart it reads on from its persisted cursor.
 */
export class WebhookFanout {
  private buffer: EventRecord[] = [];
  /** Events landed that the buffer could not hold: read them back from the store. */
  private overflow = false;
  private cursor: string | null = null;
  private saved: string | null = null;
  private unsaved = 0;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = true;
  /** Ids already fanned out while reading back from the store, so a landed one is not done twice. */
  private readonly recent = new Lru<string, true>(BUFFER_LIMIT);

  constructor(
    private readonly store: Store,
    private readonly events: EventsRepo,
    private readonly meta: MetaRepo,
    private readonly webhooks: Pick<Webhooks, 'ofAccount' | 'domainsOf'>,
    private readonly jobs: JobsRepo,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly notify: (dueMs: number) => void,
    /** Where the events that got jobs are kept for their bodies (absent: they are read back). */
    private readonly kept?: RecentEvents,
  ) {}

  /** Subscribes to landed events and reads on from the cursor (the first start begins now). */
  async start(): Promise<void> {
    this.cursor = await this.meta.cursor(FANOUT_CONSUMER);
    this.saved = this.cursor;
    if (this.cursor === null) {
      // A new store, or one written before webhooks were delivered: no backlog to send.
      const newest = await this.events.newestId();
      if (newest !== null) {
        this.cursor = newest;
        await this.store.commit([this.meta.setCursor(FANOUT_CONSUMER, newest)]);
        this.saved = newest;
      }
    }
    this.stopped = false;
    this.overflow = true;
    this.events.onLanded((event) => this.landed(event));
    this.poke();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    if (this.cursor !== null && this.cursor !== this.saved) await this.store.commit([this.meta.setCursor(FANOUT_CONSUMER, this.cursor)]);
  }

  /** Waits until every event landed so far has been fanned out (tests, shutdown). */
  async drained(): Promise<void> {
    while (this.running) await this.running;
  }

  private landed(event: EventRecord): void {
    if (this.stopped || FLAG_OF_EVENT[event.type] === undefined) return;
    if (this.buffer.length >= BUFFER_LIMIT) {
      // Too many to hold: they are all in the store after the cursor.
      this.overflow = true;
      this.buffer = [];
    } else this.buffer.push(event);
    this.poke();
  }

  private poke(): void {
    if (this.stopped) return;
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
      } catch (err) {
        this.log.error({ err }, 'webhook fan-out failed; trying again in 5 s');
        setTimeout(() => this.poke(), 5000).unref();
      } finally {
        this.running = null;
      }
    })();
  }

  private async drain(): Promise<void> {
    while (!this.stopped) {
      let events: EventRecord[];
      if (this.overflow) {
        // Read back from the store: every event after the cursor, in id order. What lands
        // meanwhile is also buffered; `recent` keeps it from being done twice.
        events = await this.events.after(this.cursor, BATCH);
        if (events.length < BATCH) this.overflow = false;
        for (const e of events) this.remember(e.id);
      } else {
        events = this.buffer.splice(0, BATCH).filter((e) => !this.recent.has(e.id));
      }
      if (events.length === 0) {
        if (!this.overflow && this.buffer.length === 0) return;
        continue;
      }
      await this.fanOut(events);
    }
  }

  private remember(id: string): void {
    this.recent.set(id, true);
  }

  /** One batch: the jobs of these events and the cursor past them. */
  private async fanOut(events: EventRecord[]): Promise<void> {
    const now = this.clock.now();
    const byAccount = new Map<string, Array<{ webhook: WebhookRecord; domains: Set<string> | null }>>();
    const ops: WriteOp[] = [];
    const created: JobRecord[] = [];
    /** The events that got jobs, with how many. */
    const wanted: Array<{ event: EventRecord; jobs: number }> = [];
    let last = this.cursor;
    for (const event of events) {
      if (last === null || event.id > last) last = event.id;
      if (FLAG_OF_EVENT[event.type] === undefined) continue;
      let hooks = byAccount.get(event.accountId);
      if (!hooks) {
        const all = (await this.webhooks.ofAccount(event.accountId)).filter((w) => w.enabled);
        hooks = await Promise.all(
          all.map(async (webhook) => ({ webhook, domains: webhook.scope === 'scoped' ? new Set(await this.webhooks.domainsOf(webhook)) : null })),
        );
        byAccount.set(event.accountId, hooks);
      }
      let mine: { event: EventRecord; jobs: number } | null = null;
      for (const { webhook, domains } of hooks) {
        if (!wants(webhook, event, domains)) continue;
        if (!mine) wanted.push((mine = { event, jobs: 0 }));
        mine.jobs += 1;
        const job = newJob('webhook', { accountId: event.accountId, targetId: webhook.id, eventId: event.id }, now);
        ops.push(...this.jobs.create(job));
        created.push(job);
      }
    }
    this.unsaved += events.length;
    if (last !== null && last !== this.saved && (created.length > 0 || this.unsaved >= CURSOR_LAG)) ops.push(this.meta.setCursor(FANOUT_CONSUMER, last));
    if (ops.length > 0) {
      await this.store.commit(ops);
      this.saved = last;
      this.unsaved = 0;
    }
    this.cursor = last;
    // Kept once on disk, for the engine's first read: a job is then run, and its body built,
    // without reading it or its event back.
    this.jobs.created(created);
    for (const { event, jobs } of wanted) this.kept?.add(event, jobs);
    if (created.length > 0) this.notify(now);
  }
}
