import type { EventRecorder } from '../events/recorder.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageHitsRecord, MessageRecord } from '../store/records.ts';
import { StoreClosedError } from '../store/store.ts';
import { Lru } from '../util/lru.ts';
import { iso, type Clock } from '../util/time.ts';
import { botReason } from './bots.ts';
import type { ThreadHit } from './thread-protocol.ts';

/** Hits written in one batch at most. */
const MAX_BATCH = 2_000;
/** Messages whose counts are kept in memory between batches at most. */
const COUNTS_MAX = 20_000;

interface Hit {
  id: string;
  kind: 'open' | 'click';
  ip: string;
  userAgent: string;
  url: string | undefined;
  at: number;
}

/**
 * The recording of opens and clicks. The tracking listener (its own thread) answers a request
 * once its message and link are known and hands the hits over every few milliseconds; the hits
 * taken meanwhile are written together right after (one batch: each hit's `message.opened` /
 * `message.clicked` with is_bot and its statistics, and each message's counts), so that a
 * redirect never waits for a disk sync and a busy listener costs a batch per handover, not one
 * write per click. A crash can lose the hits answered in the last moments; never a message or
 * its mail.
 *
 * A message's counts are a record of their own (MessageHitsRecord), not fields of the message:
 * a hit costs a few bytes instead of a rewrite of the whole record, and never waits for (or
 * races) the delivery path's writes of the message. Only this class writes them, one batch at
 * a time, so the counts it keeps in memory between batches are what the store holds.
 */
export class TrackingHits {
  private queue: Hit[] = [];
  private scheduled = false;
  private running: Promise<void> | null = null;
  /** Told when a batch has landed (or failed): drain(). */
  private readonly landed: Array<() => void> = [];
  /** Counts of recently hit messages, as written by the last batch. */
  private readonly counts = new Lru<string, MessageHitsRecord>(COUNTS_MAX);

  constructor(
    /** In cluster mode, another node's message is its published copy (cluster/tracked-messages.ts). */
    private readonly repo: Pick<MessagesRepo, 'get' | 'hits' | 'putHits'>,
    private readonly commit: (ops: WriteOp[]) => Promise<void>,
    private readonly events: EventRecorder,
    private readonly clock: Clock,
    private readonly scannerMs: number,
    private readonly onError: (err: unknown) => void,
    /** Told how many hits a batch held once it is done (the listener holds requests back meanwhile). */
    private readonly written: (count: number) => void = () => {},
  ) {}

  /**
   * Takes hits answered by the tracking listener, timed now; `written` is told how many of them
   * are written (or given up) once their batch is done.
   */
  take(hits: readonly ThreadHit[]): void {
    const at = this.clock.now();
    for (const h of hits) this.queue.push({ id: h.id, kind: h.kind, ip: h.ip, userAgent: h.userAgent, url: h.url, at });
    if (!this.scheduled && this.running === null) {
      this.scheduled = true;
      setImmediate(() => this.run());
    }
  }

  /** Resolves once every hit taken so far is written (shutdown). */
  async drain(): Promise<void> {
    while (this.queue.length > 0 || this.running !== null || this.scheduled) await this.nextLanding();
  }

  private nextLanding(): Promise<void> {
    return new Promise((resolve) => this.landed.push(resolve));
  }

  /** Writes batches until the queue is empty; one runs at a time. */
  private run(): void {
    this.scheduled = false;
    this.running = (async () => {
      while (this.queue.length > 0) {
        const batch = this.queue.length <= MAX_BATCH ? this.queue : this.queue.slice(0, MAX_BATCH);
        this.queue = batch === this.queue ? [] : this.queue.slice(MAX_BATCH);
        try {
          await this.write(batch);
        } catch (err) {
          if (!(err instanceof StoreClosedError)) this.onError(err);
        } finally {
          this.written(batch.length);
          for (const told of this.landed.splice(0)) told();
        }
      }
    })().finally(() => {
      this.running = null;
      for (const told of this.landed.splice(0)) told();
    });
  }

  private async write(batch: Hit[]): Promise<void> {
    const ids = [...new Set(batch.map((h) => h.id))];
    // Read again, not from `known`: a message deleted since is not written to, and the scanner
    // check needs its delivery time as it is now. Hits no longer rewrite the record, so these
    // reads are mostly the store's cache.
    const messages = new Map<string, MessageRecord>();
    for (const [i, m] of (await Promise.all(ids.map((id) => this.repo.get(id)))).entries()) {
      if (m && m.direction === 'outbound') messages.set(ids[i]!, m);
    }
    const unread = [...messages.keys()].filter((id) => !this.counts.has(id));
    const stored = await this.repo.hits(unread);
    const next = new Map<string, MessageHitsRecord>();
    for (const [i, id] of unread.entries()) next.set(id, stored[i] ?? { v: 1, opens: 0, clicks: 0, firstOpenAt: null, firstClickAt: null });
    for (const id of messages.keys()) if (!next.has(id)) next.set(id, { ...this.counts.get(id)! });

    const ops: WriteOp[] = [];
    for (const hit of batch) {
      const m = messages.get(hit.id);
      if (!m) continue;
      const counts = next.get(hit.id)!;
      const deliveredAt = m.deliveredAt ? Date.parse(m.deliveredAt) : null;
      const isBot = botReason({ userAgent: hit.userAgent, ip: hit.ip, deliveredAt, at: hit.at }, this.scannerMs) !== null;
      ops.push(...(hit.kind === 'open' ? this.opened(m, counts, hit, isBot) : this.clicked(m, counts, hit, isBot)));
    }
    // Another node's message (its published copy names it): its counts are the cluster's, kept
    // by the publication of these events (cluster/publication.ts); nothing of it is stored here.
    for (const [id, counts] of next) if (messages.get(id)!.node === undefined) ops.push(this.repo.putHits(id, counts));
    // Forgotten first: if the batch fails, the next one reads what the store holds.
    for (const id of next.keys()) this.counts.delete(id);
    if (ops.length === 0) return;
    await this.commit(ops);
    for (const [id, counts] of next) this.counts.set(id, counts);
  }

  // Field order of the events as in the contract's examples (webhooks.yaml).

  private opened(m: MessageRecord, counts: MessageHitsRecord, hit: Hit, isBot: boolean): WriteOp[] {
    const first = !isBot && !counts.firstOpenAt && !m.firstOpenAt;
    counts.opens += 1;
    if (first) counts.firstOpenAt = iso(hit.at);
    return this.events.record(
      {
        type: 'message.opened',
        accountId: m.accountId,
        data: {
          account_id: m.accountId,
          event: 'on_opened',
          from: m.sender,
          recipient: m.recipient,
          subject: m.subject,
          message_id_header: m.messageId,
          id: m.id,
          user_agent: hit.userAgent,
          ip: hit.ip,
          is_bot: isBot,
        },
      },
      { message: m, first },
    );
  }

  private clicked(m: MessageRecord, counts: MessageHitsRecord, hit: Hit, isBot: boolean): WriteOp[] {
    const first = !isBot && !counts.firstClickAt && !m.firstClickAt;
    counts.clicks += 1;
    if (first) counts.firstClickAt = iso(hit.at);
    return this.events.record(
      {
        type: 'message.clicked',
        accountId: m.accountId,
        data: {
          account_id: m.accountId,
          event: 'on_clicked',
          from: m.sender,
          recipient: m.recipient,
          subject: m.subject,
          message_id_header: m.messageId,
          id: m.id,
          url: hit.url ?? '',
          user_agent: hit.userAgent,
          ip: hit.ip,
          is_bot: isBot,
        },
      },
      { message: m, first },
    );
  }
}
