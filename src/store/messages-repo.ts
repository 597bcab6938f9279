import { wellFormed } from '../util/json-limits.ts';
import { hash } from 'node:crypto';
import type { WriteOp } from './group-commit.ts';
import { collectNewestFirst, type Page, type PageRequest } from './page.ts';
import type { MessageHitsRecord, MessageRecord, MessageStatus } from './records.ts';
import type { StoreAccess } from './store.ts';
import type { FamilyApi } from './pg/family.ts';
import { idFloor } from '../util/ids.ts';
import { timeKey } from '../util/time.ts';
import { JobIndex } from './job-index.ts';

/** What the message list may be filtered on; every field narrows the result (tags: any of them). */
export interface MessageFilter {
  statuses?: MessageStatus[];
  sender?: string;
  recipient?: string;
  subject?: string;
  messageIdHeader?: string;
  tags?: string[];
  /** Only messages of these sender domains (domain-scoped keys). */
  domainIds?: string[];
  /** created_at window, inclusive, in ms. */
  fromMs?: number;
  toMs?: number;
}

/** Body chunks are stored as separate records of at most this size: a body is never one value. */
export const BODY_CHUNK_BYTES = 64 * 1024;

/**
 * Messages by id, with their secondary indexes (account, status, sender, recipient, subject,
 * Message-ID, tag, domain) written in the same batch as the record; bodies in chunks, shared by
 * reference; the due-time index the delivery engine reads; and the retention expiry index.
 */
export class MessagesRepo {
  private readonly index: JobIndex;

  constructor(private readonly store: StoreAccess) {
    this.index = new JobIndex(store);
  }

  get(id: string): Promise<MessageRecord | undefined> {
    return this.store.get<MessageRecord>('messages', id);
  }

  /**
   * Several messages by id through the store's cache, in one read of those not kept: the engine
   * takes due messages in batches, and their attempts read them again.
   */
  getManyCached(ids: readonly string[]): Promise<Array<MessageRecord | undefined>> {
    return this.store.getMany<MessageRecord>('messages', ids);
  }

  /** Several messages by id in one read around the cache (lists), in the order asked (undefined where absent). */
  getMany(ids: string[]): Promise<Array<MessageRecord | undefined>> {
    return this.store.families.messages.getMany(ids) as Promise<Array<MessageRecord | undefined>>;
  }

  /** The messages of an account whose Message-ID header is `header`. */
  async findByMessageId(accountId: string, header: string): Promise<MessageRecord[]> {
    const prefix = indexPrefix('m', accountId, enc(header));
    const ids = (await this.store.families.messageIndex.values({ gt: prefix, lt: `${prefix}\xff`, limit: 100 }).all()) as string[];
    const records = await Promise.all(ids.map((id) => this.stored(id)));
    return records.filter((m): m is MessageRecord => m !== undefined);
  }

  /**
   * A record read around the store's cache: lists and searches walk many records once, and
   * would push out those of the queue, which are read three times each.
   */
  private async stored(id: string): Promise<MessageRecord | undefined> {
    return (await this.store.families.messages.get(id)) as MessageRecord | undefined;
  }

  /** The links a tracked message's click tokens number (kept as long as its metadata). */
  putLinks(id: string, links: string[]): WriteOp[] {
    return [{ type: 'put', family: 'links', key: id, value: links }];
  }

  async links(id: string): Promise<string[] | undefined> {
    return (await this.store.families.links.get(id)) as string[] | undefined;
  }

  /** The opens and clicks of tracked messages, in the order asked (undefined: none yet). */
  hits(ids: string[]): Promise<Array<MessageHitsRecord | undefined>> {
    return this.store.getMany<MessageHitsRecord>('messageHits', ids);
  }

  putHits(id: string, hits: MessageHitsRecord): WriteOp {
    return { type: 'put', family: 'messageHits', key: id, value: hits };
  }

  /** Writes the record, moving its index and expiry entries from `previous` when given. */
  put(next: MessageRecord, previous?: MessageRecord): WriteOp[] {
    const ops: WriteOp[] = [{ type: 'put', family: 'messages', key: next.id, value: next }];
    // Entries that `previous` (the stored record) already has are there: only what changed is
    // written (an outcome changes the status entry, not the other six). Keys are made only for
    // the fields that changed: an outcome would otherwise make all of them twice, hashes included.
    if (previous === undefined) {
      for (const key of indexKeys(next)) ops.push({ type: 'put', family: 'messageIndex', key, value: next.id });
      for (const key of expiryKeys(next)) ops.push({ type: 'put', family: 'messageExpiry', key, value: next.id });
      return ops;
    }
    indexChanges(ops, next, previous);
    if (expiryChanged(next, previous)) entryChanges(ops, 'messageExpiry', expiryKeys(next), expiryKeys(previous), next.id);
    return ops;
  }

  /** Removes the record and every entry pointing at it (not its body: see releaseBody). */
  delete(record: MessageRecord): WriteOp[] {
    return [
      { type: 'del', family: 'messages', key: record.id },
      ...indexKeys(record).map((key): WriteOp => ({ type: 'del', family: 'messageIndex', key })),
      ...expiryKeys(record).map((key): WriteOp => ({ type: 'del', family: 'messageExpiry', key })),
      ...this.unschedule(record),
      ...(record.tracking.click ? [{ type: 'del', family: 'links', key: record.id } as WriteOp] : []),
      ...(record.tracking.open || record.tracking.click ? [{ type: 'del', family: 'messageHits', key: record.id } as WriteOp] : []),
    ];
  }

  /** Every stored message, in id order, read around the cache (a rebuild of the statistics counters). */
  async *all(): AsyncGenerator<MessageRecord> {
    for await (const value of this.store.families.messages.values()) yield value as MessageRecord;
  }

  /** The account's newest message (ids are time-sortable), or undefined when it has none stored. */
  async newest(accountId: string): Promise<MessageRecord | undefined> {
    const prefix = indexPrefix('a', accountId);
    const [id] = (await this.store.families.messageIndex.values({ gt: prefix, lt: `${prefix}\xff`, reverse: true, limit: 1 }).all()) as string[];
    return id === undefined ? undefined : this.get(id);
  }

  /**
   * Takes a message off the due-time index and lists it under its account while the account is
   * not active (with the record's `heldAt`, in the caller's batch).
   */
  hold(record: MessageRecord): WriteOp[] {
    return [...this.unschedule(record), { type: 'put', family: 'messagesHeld', key: `${record.accountId}:${record.id}`, value: record.id }];
  }

  /** The held entry's removal; `next` (no longer held) goes back on the index at its `dueAt`. */
  unhold(record: MessageRecord, next?: MessageRecord): WriteOp[] {
    return [{ type: 'del', family: 'messagesHeld', key: `${record.accountId}:${record.id}` }, ...(next ? this.schedule(next) : [])];
  }

  /** Removes a held entry whose message is gone or no longer held. */
  async dropHeld(accountId: string, id: string): Promise<void> {
    await this.store.commit([{ type: 'del', family: 'messagesHeld', key: `${accountId}:${id}` }]);
  }

  /** Ids of up to `limit` messages held for an account. */
  async heldOf(accountId: string, limit: number): Promise<string[]> {
    const prefix = `${accountId}:`;
    return (await this.store.families.messagesHeld.values({ gt: prefix, lt: `${prefix}\xff`, limit }).all()) as string[];
  }

  /** Every held message, by account: `[accountId, messageId]`. */
  async *held(): AsyncGenerator<[string, string]> {
    for await (const key of this.store.families.messagesHeld.keys()) {
      const [accountId, id] = key.split(':') as [string, string];
      yield [accountId, id];
    }
  }

  /** Puts the message on the job engine's due-time index at its `dueAt`. */
  schedule(record: MessageRecord): WriteOp[] {
    return [this.index.put('message', record.id, Date.parse(record.dueAt))];
  }

  unschedule(record: MessageRecord): WriteOp[] {
    return [this.index.del('message', record.id, Date.parse(record.dueAt))];
  }

  /** Every message entry of the due-time index, in due order (the operator's queue view). */
  async *scheduled(): AsyncGenerator<{ dueMs: number; id: string }> {
    for await (const { dueMs, id } of this.index.entries('message')) yield { dueMs, id };
  }

  /** Whether the message still has an entry on the due-time index. */
  isScheduled(record: MessageRecord): Promise<boolean> {
    return this.index.has('message', record.id, Date.parse(record.dueAt));
  }

  /**
   * Ops storing a body from its chunks. With `spooled` chunks already written at indices 1 to
   * `spooled` (a large message written as it arrived), chunks[0] goes first and the rest after them.
   */
  putBody(bodyId: string, chunks: Buffer[], spooled = 0): WriteOp[] {
    return chunks.map((chunk, i): WriteOp => ({ type: 'put', family: 'bodies', key: chunkKey(bodyId, i === 0 ? 0 : i + spooled), value: chunk }));
  }

  /** The op writing one chunk of a body as it arrives (index ≥ 1: the first is written last). */
  spoolChunk(bodyId: string, index: number, chunk: Buffer): WriteOp {
    return { type: 'put', family: 'bodies', key: chunkKey(bodyId, index), value: chunk };
  }

  /** Ops deleting every chunk written of a body (a spooled message that was refused). */
  async dropChunks(bodyId: string): Promise<WriteOp[]> {
    const keys = await this.store.families.bodies.keys({ gt: `${bodyId}:`, lt: `${bodyId}:\xff` }).all();
    return keys.map((key) => ({ type: 'del', family: 'bodies', key }));
  }

  /** Records that `messageId` uses the body. */
  refBody(bodyId: string, messageId: string): WriteOp[] {
    return [{ type: 'put', family: 'bodyRefs', key: `${bodyId}:${messageId}`, value: 1 }];
  }

  /**
   * Drops a message's reference to its body, and the body itself when no other message uses
   * it. The caller serialises releases of one body (the body id's lock).
   */
  async releaseBody(bodyId: string, messageId: string): Promise<WriteOp[]> {
    const ops: WriteOp[] = [{ type: 'del', family: 'bodyRefs', key: `${bodyId}:${messageId}` }];
    const refs = await this.store.families.bodyRefs.keys({ gt: `${bodyId}:`, lt: `${bodyId}:\xff`, limit: 2 }).all();
    if (refs.some((key) => key !== `${bodyId}:${messageId}`)) return ops;
    for await (const key of this.store.families.bodies.keys({ gt: `${bodyId}:`, lt: `${bodyId}:\xff` })) {
      ops.push({ type: 'del', family: 'bodies', key: key });
    }
    return ops;
  }

  /** The body's bytes, chunk by chunk. */
  async *body(bodyId: string): AsyncGenerator<Buffer> {
    for await (const chunk of this.store.families.bodies.values({ gt: `${bodyId}:`, lt: `${bodyId}:\xff` })) {
      yield chunk as Buffer;
    }
  }

  /** Ids whose metadata retention ended before `nowMs`. */
  expiredMetadata(nowMs: number, limit: number): Promise<string[]> {
    return this.expired('m', nowMs, limit);
  }

  /** Ids whose content retention ended before `nowMs` (content still stored). */
  expiredContent(nowMs: number, limit: number): Promise<string[]> {
    return this.expired('c', nowMs, limit);
  }

  private async expired(kind: 'm' | 'c', nowMs: number, limit: number): Promise<string[]> {
    return (await this.store.families.messageExpiry.values({ gt: `${kind}:`, lt: `${kind}:${timeKey(nowMs)}`, limit }).all()) as string[];
  }

  /**
   * One page of an account's messages, newest first, matching `filter`. The most selective
   * index the filter names drives the walk (several ranges merged by id for lists of values);
   * the other conditions are checked on each record read from it.
   */
  async query(accountId: string, filter: MessageFilter, req: PageRequest): Promise<Page<MessageRecord>> {
    const prefixes = drivingPrefixes(accountId, filter);
    const low = filter.fromMs !== undefined ? idFloor(filter.fromMs) : '';
    const high = filter.toMs !== undefined ? idFloor(filter.toMs + 1) : '\xff';
    // Newest first: "after" a cursor means older ids, "before" means newer ones.
    const backwards = req.before !== undefined;
    const bounds = backwards
      ? { above: maxString(low, req.before!), below: high, reverse: false }
      : { above: low, below: req.after !== undefined ? minString(high, req.after) : high, reverse: true };

    return collectNewestFirst(
      mergeRanges(this.store.families.messageIndex, prefixes, bounds),
      (id) => this.stored(id),
      (record) => matches(record, filter),
      (record) => record.id,
      req,
    );
  }
}

type IndexKind = 'a' | 's' | 'f' | 'r' | 'j' | 'm' | 't' | 'd';

function indexPrefix(kind: IndexKind, accountId: string, value?: string): string {
  return value === undefined ? `${kind}:${accountId}:` : `${kind}:${accountId}:${value}:`;
}

/** Never throws: text that is not well-formed (SMTP headers can decode to it) is encoded as UTF-8 would store it. */
const enc = (text: string) => encodeURIComponent(wellFormed(text));
const address = (email: string) => enc(email.toLowerCase());
/** The last subject's key: bulk mail sends one subject many times (a one-shot hash, not a Hash object, each other time). */
let lastSubject: string | undefined;
let lastSubjectKey = '';
function subjectKey(subject: string): string {
  if (subject !== lastSubject) {
    lastSubjectKey = hash('sha256', subject, 'base64url').slice(0, 22);
    lastSubject = subject;
  }
  return lastSubjectKey;
}

/** Every index entry of the record: the account's, one per single-valued field (FIELD_ENTRIES), one per tag. */
function indexKeys(m: MessageRecord): string[] {
  const a = m.accountId;
  const keys = [indexPrefix('a', a) + m.id];
  for (const [kind, , value] of FIELD_ENTRIES) keys.push(indexPrefix(kind, a, value(m)) + m.id);
  if (m.tags.length > 0) keys.push(...tagKeys(m));
  return keys;
}

function tagKeys(m: MessageRecord): string[] {
  const tags = m.tags.length > 1 ? [...new Set(m.tags)] : m.tags;
  return tags.map((tag) => indexPrefix('t', m.accountId, enc(tag)) + m.id);
}

/** The single-valued index entries: each kind, the field it is made of, and its value in the key. */
const FIELD_ENTRIES: ReadonlyArray<readonly [IndexKind, (m: MessageRecord) => string, (m: MessageRecord) => string]> = [
  ['s', (m) => m.status, (m) => enc(m.status)],
  ['f', (m) => m.sender, (m) => address(m.sender)],
  ['r', (m) => m.recipient, (m) => address(m.recipient)],
  ['j', (m) => m.subject, (m) => subjectKey(m.subject)],
  ['m', (m) => m.messageId, (m) => enc(m.messageId)],
  ['d', (m) => m.domainId, (m) => m.domainId],
];

/**
 * Adds to `ops` those taking the index entries of `previous` to those of `next`: the entry of a
 * field is made (twice) only when the field changed (an outcome: the status alone).
 */
function indexChanges(ops: WriteOp[], next: MessageRecord, previous: MessageRecord): void {
  if (next.id !== previous.id || next.accountId !== previous.accountId) {
    entryChanges(ops, 'messageIndex', indexKeys(next), indexKeys(previous), next.id);
    return;
  }
  const a = next.accountId;
  for (const [kind, field, value] of FIELD_ENTRIES) {
    if (field(next) === field(previous)) continue;
    const before = indexPrefix(kind, a, value(previous)) + next.id;
    const after = indexPrefix(kind, a, value(next)) + next.id;
    if (before === after) continue;
    ops.push({ type: 'del', family: 'messageIndex', key: before });
    ops.push({ type: 'put', family: 'messageIndex', key: after, value: next.id });
  }
  if (next.tags !== previous.tags && (next.tags.length !== previous.tags.length || next.tags.some((tag, i) => tag !== previous.tags[i]))) {
    entryChanges(ops, 'messageIndex', tagKeys(next), tagKeys(previous), next.id);
  }
}

/** Whether a field the expiry entries are made of differs between the two records (expiryKeys). */
function expiryChanged(a: MessageRecord, b: MessageRecord): boolean {
  return a.id !== b.id || a.retainUntil !== b.retainUntil || a.dataRetainUntil !== b.dataRetainUntil || a.contentPurged !== b.contentPurged;
}

/** Adds to `ops` those taking a family's entries from `before` to `after` (each pointing at `id`). */
function entryChanges(ops: WriteOp[], family: 'messageIndex' | 'messageExpiry', after: readonly string[], before: readonly string[], id: string): void {
  for (const key of before) if (!after.includes(key)) ops.push({ type: 'del', family, key });
  for (const key of after) if (!before.includes(key)) ops.push({ type: 'put', family, key, value: id });
}

function expiryKeys(m: MessageRecord): string[] {
  const keys = [`m:${timeKey(Date.parse(m.retainUntil))}:${m.id}`];
  if (!m.contentPurged) keys.push(`c:${timeKey(Date.parse(m.dataRetainUntil))}:${m.id}`);
  return keys;
}

function chunkKey(bodyId: string, index: number): string {
  return `${bodyId}:${index.toString().padStart(6, '0')}`;
}

/** The index ranges to walk: those of the most selective condition given. */
function drivingPrefixes(a: string, f: MessageFilter): string[] {
  if (f.messageIdHeader !== undefined) return [indexPrefix('m', a, enc(f.messageIdHeader))];
  if (f.recipient !== undefined) return [indexPrefix('r', a, address(f.recipient))];
  if (f.sender !== undefined) return [indexPrefix('f', a, address(f.sender))];
  if (f.subject !== undefined) return [indexPrefix('j', a, subjectKey(f.subject))];
  if (f.tags?.length) return [...new Set(f.tags)].map((tag) => indexPrefix('t', a, enc(tag)));
  if (f.statuses?.length) return [...new Set(f.statuses)].map((s) => indexPrefix('s', a, enc(s)));
  if (f.domainIds) return f.domainIds.map((id) => indexPrefix('d', a, id));
  return [indexPrefix('a', a)];
}

function matches(m: MessageRecord, f: MessageFilter): boolean {
  const created = Date.parse(m.createdAt);
  return (
    (f.statuses === undefined || f.statuses.length === 0 || f.statuses.includes(m.status)) &&
    (f.sender === undefined || m.sender.toLowerCase() === f.sender.toLowerCase()) &&
    (f.recipient === undefined || m.recipient.toLowerCase() === f.recipient.toLowerCase()) &&
    (f.subject === undefined || m.subject === f.subject) &&
    (f.messageIdHeader === undefined || m.messageId === f.messageIdHeader) &&
    (f.tags === undefined || f.tags.length === 0 || f.tags.some((t) => m.tags.includes(t))) &&
    (f.domainIds === undefined || f.domainIds.includes(m.domainId)) &&
    (f.fromMs === undefined || created >= f.fromMs) &&
    (f.toMs === undefined || created <= f.toMs)
  );
}

const maxString = (a: string, b: string) => (a > b ? a : b);
const minString = (a: string, b: string) => (a < b ? a : b);

/**
 * Walks several index ranges at once in id order (descending when `reverse`), yielding each
 * id once. Each range holds `prefix + id` keys strictly between `above` and `below`.
 */
async function* mergeRanges(index: FamilyApi, prefixes: string[], bounds: { above: string; below: string; reverse: boolean }): AsyncGenerator<string> {
  const iterators = prefixes.map((p) => index.iterator({ gt: p + bounds.above, lt: p + bounds.below, reverse: bounds.reverse }));
  try {
    const heads = await Promise.all(iterators.map(async (it) => (await it.next())?.[1] as string | undefined));
    let last: string | undefined;
    for (;;) {
      let pick = -1;
      for (let i = 0; i < heads.length; i++) {
        const id = heads[i];
        if (id === undefined) continue;
        if (pick < 0 || (bounds.reverse ? id > heads[pick]! : id < heads[pick]!)) pick = i;
      }
      if (pick < 0) return;
      const id = heads[pick]!;
      heads[pick] = (await iterators[pick]!.next())?.[1] as string | undefined;
      if (id !== last) yield id;
      last = id;
    }
  } finally {
    await Promise.all(iterators.map((it) => it.close()));
  }
}
