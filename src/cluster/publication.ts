import type pg from 'pg';
import { counted, keyOf } from '../stats/counters.ts';
import { addCounts, cloneCounts } from '../store/counter-cache.ts';
import { counterAdds, expandCount } from '../store/counter-keys.ts';
import { MessagesRepo } from '../store/messages-repo.ts';
import { finalChanges, type KvChange, type PgKv } from '../store/pg/kv.ts';
import type { EventRecord, MessageHitsRecord, MessageRecord } from '../store/records.ts';
import type { Counts, Family, WriteOp } from '../store/types.ts';
import { PublishedView } from './published-view.ts';

/**
 * One batch of a node's events outbox to publish, with this node's current records of the
 * messages they touch (and of messages changed without an event).
 */
export interface Batch {
  /** In id order. */
  events: EventRecord[];
  /** This node's records by id; a message of another node (an open recorded here) or one gone is absent. */
  records: Map<string, MessageRecord>;
  /** The links of tracked messages, for those published for the first time (an open on another node needs them). */
  links: Map<string, string[]>;
}

export interface PublicationSettings {
  nodeId: string;
  /** The `published` table. */
  published: PgKv;
  /** Whether events count in the cluster's statistics counters (statistics.counters). */
  counting: boolean;
}

/** What a batch did: the node's cursor after it (null: nothing published yet), and how many of its events were new. */
export interface Published {
  cursor: string | null;
  events: number;
}

const HIT_EVENTS = new Set(['message.opened', 'message.clicked']);

/**
 * Publishes a batch in ONE transaction: the messages' current records with their index entries
 * (MessagesRepo over the published view writes them as it writes a node's own), the events, what
 * they add to the cluster's statistics counters and to the messages' opens and clicks, and the
 * node's cursor (table `publication`). With the cursor in the same transaction, each event is
 * published exactly once: events the stored cursor has passed (a batch sent again after a crash,
 * or by a node whose own memory of its cursor is behind) are left out, the records are whole
 * states and the events keyed by id, so publishing a batch again changes nothing.
 *
 * Rows other nodes write too (counters, opens and clicks) are read FOR UPDATE in key order,
 * after making the missing ones (in the same order), and written back summed: no increment of
 * another node's transaction is lost, and two nodes lock in one order.
 */
export async function publish(pool: pg.Pool, batch: Batch, settings: PublicationSettings): Promise<Published> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const published = await publishIn(client, batch, settings);
    await client.query('COMMIT');
    return published;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

async function publishIn(client: pg.ClientBase, batch: Batch, settings: PublicationSettings): Promise<Published> {
  const { nodeId, published } = settings;
  const table = published.table;
  const { rows } = await client.query<{ cursor: string }>('SELECT cursor FROM publication WHERE node_id = $1 FOR UPDATE', [nodeId]);
  const done = rows[0]?.cursor ?? null;
  const events = batch.events.filter((e) => done === null || e.id > done);
  const hitEvents = events.filter((e) => HIT_EVENTS.has(e.type));

  // The records as published now: what the index entries move from, and another node's record an open here counts by.
  const hitIds = [...new Set(hitEvents.map((e) => e.data.id as string))];
  const before = await readRows(client, table, 'messages', [...new Set([...batch.records.keys(), ...hitIds])]);
  const view = new MessagesRepo(new PublishedView(published));
  const ops: WriteOp[] = [];
  for (const [id, record] of batch.records) {
    const copy: MessageRecord = { ...record, head: '', node: nodeId };
    const stored = before.get(id);
    if (stored !== undefined && stored === JSON.stringify(copy)) continue;
    ops.push(...view.put(copy, stored === undefined ? undefined : (JSON.parse(stored) as MessageRecord)));
    const links = batch.links.get(id);
    if (stored === undefined && links) ops.push(...view.putLinks(id, links));
  }
  const changes: KvChange[] = finalChanges(ops, (value) => JSON.stringify(value));
  for (const e of events) changes.push({ family: 'events', key: e.id, value: JSON.stringify(e) });

  const adds = new Map<string, Counts>();
  const add = (key: string, value: Counts) => {
    const current = adds.get(key);
    if (current) addCounts(current, value);
    else adds.set(key, cloneCounts(value));
  };
  if (settings.counting) {
    for (const e of events) if (e.count && !HIT_EVENTS.has(e.type)) for (const row of expandCount(e.count.key, e.count.value)) add(row.key, row.value);
  }

  if (hitEvents.length > 0) {
    const recordOf = (id: string): MessageRecord | undefined => {
      const stored = before.get(id);
      return batch.records.get(id) ?? (stored === undefined ? undefined : (JSON.parse(stored) as MessageRecord));
    };
    const stored = await lockRows(client, table, 'messageHits', hitIds);
    const hits = new Map<string, MessageHitsRecord>();
    for (const id of hitIds) {
      const value = stored.get(id);
      const record = value === undefined || value === PLACEHOLDER ? null : (JSON.parse(value) as MessageHitsRecord);
      hits.set(id, record ?? { v: 1, opens: 0, clicks: 0, firstOpenAt: null, firstClickAt: null });
    }
    for (const e of hitEvents) {
      const m = recordOf(e.data.id as string);
      const first = countHit(hits.get(e.data.id as string)!, e, m);
      // The first open or click by a person, of the cluster's (not of one node's): counted once.
      if (first && settings.counting && m && counted(m)) {
        for (const op of counterAdds(keyOf(m, Date.parse(e.createdAt)), e.type === 'message.opened' ? { o: 1 } : { c: 1 })) {
          if (op.type === 'add') add(op.key, op.value);
        }
      }
    }
    for (const [id, record] of hits) changes.push({ family: 'messageHits', key: id, value: JSON.stringify(record) });
  }

  if (adds.size > 0) {
    const keys = [...adds.keys()];
    const stored = await lockRows(client, table, 'counters', keys);
    for (const key of keys) {
      const delta = adds.get(key)!;
      // An empty add makes an index row: the lock made it when it was missing.
      if (isEmpty(delta)) continue;
      const value = stored.get(key);
      const total = value === undefined || value === PLACEHOLDER ? {} : (JSON.parse(value) as Counts);
      changes.push({ family: 'counters', key, value: JSON.stringify(addCounts(total, delta)) });
    }
  }

  await published.apply(client, changes);
  if (events.length === 0) return { cursor: done, events: 0 };
  const cursor = events.at(-1)!.id;
  await client.query(
    'INSERT INTO publication (node_id, cursor, published_at) VALUES ($1, $2, now()) ON CONFLICT (node_id) DO UPDATE SET cursor = EXCLUDED.cursor, published_at = now()',
    [nodeId, cursor],
  );
  return { cursor, events: events.length };
}

/** A row made to be locked, written over in the same transaction. */
const PLACEHOLDER = '{}';

/**
 * Adds one open or click (bots too) to the message's counts; returns whether it is the first by
 * a person, as a node counts it for a message of its own (tracking/hits.ts).
 */
function countHit(hits: MessageHitsRecord, e: EventRecord, m: MessageRecord | undefined): boolean {
  const person = e.data.is_bot !== true;
  if (e.type === 'message.opened') {
    const first = person && !hits.firstOpenAt && !m?.firstOpenAt;
    hits.opens += 1;
    if (first) hits.firstOpenAt = e.createdAt;
    return first;
  }
  const first = person && !hits.firstClickAt && !m?.firstClickAt;
  hits.clicks += 1;
  if (first) hits.firstClickAt = e.createdAt;
  return first;
}

async function readRows(client: pg.ClientBase, table: string, family: Family, keys: string[]): Promise<Map<string, string>> {
  if (keys.length === 0) return new Map();
  const { rows } = await client.query<{ key: string; value: string }>({
    name: `${table}-publication-read`,
    text: `SELECT key, value FROM ${table} WHERE family = $1 AND key = ANY($2::text[])`,
    values: [family, keys],
  });
  return new Map(rows.map((r) => [r.key, r.value]));
}

/**
 * The rows of `keys`, locked until the transaction ends: the missing ones are made first (as
 * PLACEHOLDER), so that a row another node is making too is waited for rather than written over.
 * Both in key order, which every node follows: two transactions never wait on each other in a circle.
 */
async function lockRows(client: pg.ClientBase, table: string, family: Family, keys: string[]): Promise<Map<string, string>> {
  const sorted = [...keys].sort();
  await client.query({
    name: `${table}-publication-make`,
    text: `INSERT INTO ${table} (family, key, value) SELECT $1, k, $3 FROM unnest($2::text[]) WITH ORDINALITY AS t(k, n) ORDER BY n ON CONFLICT (family, key) DO NOTHING`,
    values: [family, sorted, PLACEHOLDER],
  });
  const { rows } = await client.query<{ key: string; value: string }>({
    name: `${table}-publication-lock`,
    text: `SELECT key, value FROM ${table} WHERE family = $1 AND key = ANY($2::text[]) ORDER BY key FOR UPDATE`,
    values: [family, sorted],
  });
  return new Map(rows.map((r) => [r.key, r.value]));
}

function isEmpty(counts: Counts): boolean {
  for (const _ in counts) return false;
  return true;
}
