import { MessagesRepo } from '../store/messages-repo.ts';
import { finalChanges, type PgKv } from '../store/pg/kv.ts';
import type { WriteOp } from '../store/types.ts';
import { idFloor } from '../util/ids.ts';
import { PublishedView } from './published-view.ts';

/** Messages deleted per transaction. */
const CHUNK = 200;

/**
 * The retention of what the nodes published, done once per cluster (by the leader), as each
 * node does its own: a message goes when its metadata retention ends (its record, index entries,
 * links and counts), an event when it is older than events.retention_days. The statistics
 * counters stay, as a node's do.
 */
export async function purgePublished(published: PgKv, nowMs: number, eventsBeforeMs: number): Promise<{ messages: number; events: number }> {
  const repo = new MessagesRepo(new PublishedView(published));
  let messages = 0;
  for (;;) {
    const ids = await repo.expiredMetadata(nowMs, CHUNK);
    const records = await repo.getMany(ids);
    const ops: WriteOp[] = [];
    for (const record of records) if (record) ops.push(...repo.delete(record));
    // None left, or only entries whose record is gone (nothing to go by): done.
    if (ops.length === 0) break;
    await published.write(finalChanges(ops, (value) => JSON.stringify(value)));
    messages += records.filter(Boolean).length;
  }
  const { rowCount } = await published.pool.query(`DELETE FROM ${published.table} WHERE family = 'events' AND key < $1`, [idFloor(eventsBeforeMs)]);
  return { messages, events: rowCount ?? 0 };
}
