import type { WriteOp } from '../store/group-commit.ts';
import type { MessageFilter, MessagesRepo } from '../store/messages-repo.ts';
import type { Page, PageRequest } from '../store/page.ts';
import type { MessageRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { badRequest, conflict, forbidden, notFound } from '../util/errors.ts';
import type { KeyedMutex } from '../util/keyed-mutex.ts';
import { iso, type Clock } from '../util/time.ts';
import { parseMessageRef } from './message-id.ts';
import { mapLimited } from '../util/limited.ts';
import { contentDue, isFinal } from './retention.ts';

/** Which of an account's messages a caller may see or act on, by sender domain id. */
export type DomainFilter = (domainId: string) => boolean;

/** A message's new state and the other ops of its batch. */
export interface Changed {
  next: MessageRecord;
  extra: WriteOp[];
}

/**
 * What the read API asks of messages: this node's store (Messages), or in cluster mode the
 * records every node published (cluster/published-messages.ts).
 */
export interface MessageReads {
  list(accountId: string, filter: MessageFilter, page: PageRequest): Promise<Page<MessageRecord>>;
  get(accountId: string, ref: string, visible: DomainFilter): Promise<MessageRecord>;
  shown(messages: MessageRecord[]): Promise<MessageRecord[]>;
  content(message: MessageRecord): Promise<Buffer | null>;
  /** Cluster mode: the node that keeps the content of a message of another node (null: this one). */
  contentNode?(message: MessageRecord): string | null;
}

/**
 * Reading messages back, cancelling scheduled ones and the retention purge. Changes to one
 * message run under its lock (`message:<id>`), which the delivery engine shares.
 */
export class Messages implements MessageReads {
  constructor(
    private readonly store: Pick<Store, 'commit'>,
    private readonly repo: MessagesRepo,
    private readonly locks: KeyedMutex,
    private readonly clock: Clock,
    /** Whether the delivery engine holds the message (ready or in flight): it can no longer be cancelled. None without an engine. */
    private readonly delivering: (id: string) => boolean = () => false,
  ) {}

  /**
   * The stored record, read under the message's lock: a change in progress (a cancel that has
   * passed its checks) is on disk before this answers.
   */
  current(id: string): Promise<MessageRecord | undefined> {
    return this.locks.run(`message:${id}`, () => this.repo.get(id));
  }

  list(accountId: string, filter: MessageFilter, page: PageRequest): Promise<Page<MessageRecord>> {
    return this.repo.query(accountId, filter, page);
  }

  /**
   * The messages as shown: each tracked one's opens and clicks (its hits record, written by
   * tracking/hits.ts) added to its own older counts. For presenting only, never to be written back.
   */
  async shown(messages: MessageRecord[]): Promise<MessageRecord[]> {
    const tracked = messages.filter((m) => m.tracking.open || m.tracking.click);
    const hits = await this.repo.hits(tracked.map((m) => m.id));
    const byId = new Map(tracked.map((m, i) => [m.id, hits[i]]));
    return messages.map((m) => {
      const h = byId.get(m.id);
      return h === undefined
        ? m
        : {
            ...m,
            openCount: m.openCount + h.opens,
            clickCount: m.clickCount + h.clicks,
            firstOpenAt: m.firstOpenAt || h.firstOpenAt,
            firstClickAt: m.firstClickAt || h.firstClickAt,
          };
    });
  }

  /** A message by its full Message-ID or bare UUID; 404 when unknown or not visible. */
  async get(accountId: string, ref: string, visible: DomainFilter): Promise<MessageRecord> {
    const parsed = parseMessageRef(ref);
    if (!parsed) throw badRequest('invalid message_id: give the Message-ID (<id@domain>) or its UUID');
    const candidates =
      parsed.kind === 'id'
        ? [await this.repo.get(parsed.id)].filter((m): m is MessageRecord => m !== undefined && m.accountId === accountId)
        : await this.repo.findByMessageId(accountId, parsed.header);
    const message = candidates.find((m) => visible(m.domainId));
    if (!message) throw notFound('message not found');
    return message;
  }

  /** The raw RFC 5322 content (head + body), or null once retention dropped it. */
  async content(message: MessageRecord): Promise<Buffer | null> {
    if (message.contentPurged) return null;
    const parts: Buffer[] = [Buffer.from(message.head, 'latin1')];
    for await (const chunk of this.repo.body(message.bodyId)) parts.push(chunk);
    return Buffer.concat(parts);
  }

  /**
   * Cancels a scheduled message that has not been attempted: it leaves the due-time index and
   * becomes `Cancelled`. `mayCancel` checks the caller's scope for the sender domain (403).
   */
  async cancel(accountId: string, ref: string, visible: DomainFilter, mayCancel: (domain: string) => boolean): Promise<MessageRecord> {
    const found = await this.get(accountId, ref, visible);
    if (!mayCancel(found.domain)) throw forbidden('Insufficient permissions for the required scope');
    return this.locks.run(`message:${found.id}`, async () => {
      const current = await this.repo.get(found.id);
      if (!current) throw notFound('message not found');
      if (current.status === 'Cancelled') throw conflict('message is already cancelled');
      if (!current.schedule?.firstAttempt) throw conflict('message is not scheduled: only scheduled messages can be cancelled');
      if (current.attempts.length > 0 || current.status !== 'Received' || !(await this.repo.isScheduled(current))) {
        throw conflict('message has already been attempted and can no longer be cancelled');
      }
      if (this.delivering(current.id)) throw conflict('message is being delivered and can no longer be cancelled');
      const now = this.clock.now();
      return this.commitChange({ ...current, status: 'Cancelled', updatedAt: iso(now) }, current, now, this.repo.unschedule(current));
    });
  }

  /**
   * Changes one message under its lock: `change` sees the stored record and returns the next one
   * with any ops to commit with it (schedule entries, events), or null to leave it as it is.
   */
  async update(id: string, change: (current: MessageRecord, now: number) => Changed | null | Promise<Changed | null>): Promise<MessageRecord | null> {
    return this.locks.run(`message:${id}`, async () => {
      const current = await this.repo.get(id);
      if (!current) return null;
      const now = this.clock.now();
      const changed = await change(current, now);
      if (!changed) return null;
      return this.commitChange(changed.next, current, now, changed.extra);
    });
  }

  /**
   * Commits a message's new state (with `extra` ops), dropping its content in the same batch when
   * delivery is final and its data retention is over (retention 0: at once). The caller holds the
   * message's lock; a body release commits under the body's lock, so that two messages sharing
   * it cannot both leave it behind.
   */
  async commitChange(next: MessageRecord, previous: MessageRecord, now: number, extra: WriteOp[] = []): Promise<MessageRecord> {
    if (!contentDue(next, now)) {
      await this.store.commit([...extra, ...this.repo.put(next, previous)]);
      return next;
    }
    const purged: MessageRecord = { ...next, contentPurged: true };
    await this.locks.run(`body:${next.bodyId}`, async () => {
      const release = await this.repo.releaseBody(next.bodyId, next.id);
      await this.store.commit([...extra, ...this.repo.put(purged, previous), ...release]);
    });
    return purged;
  }

  /**
   * Hands queued messages to another node (a drain): under their locks, those still queued and
   * not held by the delivery engine (ready or in flight: `busy`) go to `send`, which answers the
   * ids the other node has stored; only those are then deleted here, each with its entries and
   * its share of the body. Nothing is deleted that the other node did not take, and nothing the
   * engine took can be sent from here once it is gone: its attempt reads the message under the
   * same lock first.
   */
  async handOver(ids: string[], send: (queued: MessageRecord[]) => Promise<ReadonlySet<string>>): Promise<{ moved: MessageRecord[]; busy: number }> {
    return this.locks.runAll(
      ids.map((id) => `message:${id}`),
      async () => {
        const queued: MessageRecord[] = [];
        let busy = 0;
        for (const message of await this.repo.getMany(ids)) {
          if (!message || isFinal(message.status)) continue;
          if (this.delivering(message.id)) busy += 1;
          else if (message.heldAt || (await this.repo.isScheduled(message))) queued.push(message);
        }
        if (queued.length === 0) return { moved: [], busy };
        const taken = await send(queued);
        const moved = queued.filter((m) => taken.has(m.id));
        await mapLimited(moved, 16, (m) =>
          this.locks.run(`body:${m.bodyId}`, async () => {
            const release = await this.repo.releaseBody(m.bodyId, m.id);
            await this.store.commit([...this.repo.delete(m), ...(m.heldAt ? this.repo.unhold(m) : []), ...release]);
          }),
        );
        return { moved, busy };
      },
    );
  }

  /**
   * Stores a message another node handed over (a drain): the same message, with its body and
   * tracked links, queued at its due time (a held one too: delivery holds it again if its
   * account is still not active). `had`: it is here already (a drain run again after an
   * answer that was lost), and is left as it is.
   */
  async takeOver(record: MessageRecord, body: Buffer[], links: string[] | null): Promise<'taken' | 'had'> {
    return this.locks.run(`message:${record.id}`, () =>
      this.locks.run(`body:${record.bodyId}`, async () => {
        if (await this.repo.get(record.id)) return 'had';
        const next: MessageRecord = { ...record, heldAt: null };
        await this.store.commit([
          ...this.repo.putBody(record.bodyId, body),
          ...this.repo.refBody(record.bodyId, record.id),
          ...this.repo.put(next),
          ...this.repo.schedule(next),
          ...(links ? this.repo.putLinks(record.id, links) : []),
        ]);
        return 'taken';
      }),
    );
  }

  /**
   * The daily retention job: metadata past `retain_until` is deleted with the message; content
   * past its data retention is dropped once delivery is final. Works in bounded batches.
   */
  async purge(): Promise<{ messages: number; contents: number }> {
    const now = this.clock.now();
    let messages = 0;
    let contents = 0;
    for (;;) {
      const ids = await this.repo.expiredMetadata(now, 100);
      if (ids.length === 0) break;
      for (const id of ids) messages += await this.purgeOne(id, now, 'metadata');
    }
    // Content not yet final stays listed; walk past it once rather than re-reading it forever.
    let seen = 0;
    for (;;) {
      const ids = (await this.repo.expiredContent(now, seen + 100)).slice(seen);
      if (ids.length === 0) break;
      for (const id of ids) {
        const dropped = await this.purgeOne(id, now, 'content');
        contents += dropped;
        if (dropped === 0) seen++;
      }
    }
    return { messages, contents };
  }

  private purgeOne(id: string, now: number, what: 'metadata' | 'content'): Promise<number> {
    return this.locks.run(`message:${id}`, async () => {
      const current = await this.repo.get(id);
      if (!current) return 0;
      if (what === 'metadata') {
        if (current.contentPurged) await this.store.commit(this.repo.delete(current));
        else {
          await this.locks.run(`body:${current.bodyId}`, async () => {
            await this.store.commit([...this.repo.delete(current), ...(await this.repo.releaseBody(current.bodyId, current.id))]);
          });
        }
        return 1;
      }
      if (!contentDue(current, now)) return 0;
      await this.commitChange({ ...current, updatedAt: iso(now) }, current, now);
      return 1;
    });
  }
}
