import type { CountersRepo } from '../store/counters-repo.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { counted, deliveredDelta, keyOf, type CounterDelta } from './counters.ts';

/**
 * Builds the statistics counters from the stored messages, for a data directory written before
 * counters existed: reception at acceptance, the first deferral at its attempt, and the final
 * state at its time (delivered with its delivery time, bounced with its classification, failed,
 * suppressed). Earlier releases kept no opens or clicks to count. The counters are emptied
 * first, so an interrupted build simply runs again. Returns how many messages were counted.
 */
export async function rebuildCounters(store: Pick<Store, 'commit'>, counters: CountersRepo, messages: Pick<MessagesRepo, 'all'>): Promise<number> {
  await counters.clear();
  let ops: WriteOp[] = [];
  let count = 0;
  for await (const m of messages.all()) {
    if (!counted(m)) continue;
    for (const [at, delta] of countsOf(m)) ops.push(...counters.adds(keyOf(m, at), delta));
    count += 1;
    if (ops.length >= 5000) {
      await store.commit(ops);
      ops = [];
    }
  }
  await store.commit(ops);
  await counters.fold();
  return count;
}

/** What a stored message adds to the counters, and when. */
export function countsOf(m: MessageRecord): Array<[number, CounterDelta]> {
  const out: Array<[number, CounterDelta]> = [[Date.parse(m.createdAt), { r: 1 }]];
  const deferral = m.attempts.find((a) => a.status === 'Deferred');
  if (deferral) out.push([Date.parse(deferral.time), { df: 1 }]);
  const last = m.attempts.at(-1);
  const at = Date.parse(last?.time ?? m.updatedAt);
  if (m.deliveredAt) out.push([Date.parse(m.deliveredAt), deliveredDelta(m)]);
  if (m.status === 'Bounced') out.push([at, { b: 1, bc: { [m.bounceClassification || 'Uncategorized']: 1 } }]);
  else if (m.status === 'Failed') out.push([at, { f: 1 }]);
  else if (m.status === 'Suppressed') out.push([at, { s: 1 }]);
  return out;
}
