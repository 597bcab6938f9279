import type { WriteOp } from '../store/group-commit.ts';
import type { MessageRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { counted, counterAdds, deliveredDelta, keyOf, type CounterDelta } from './counters.ts';

/**
 * Builds the statistics counters from the stored messages, for a data directory written before
 * counters existed: reception at acceptance, the first deferral at its attempt, and the final
 * state at its time (delivered with its delivery time, bounced with its classification, failed,
 * suppressed). Earlier releases kept no opens or clicks to count. The counters family is emptied
 * first, so an interrupted build simply runs again. Returns how many messages were counted.
 */
export async function rebuildCounters(store: Store): Promise<number> {
  await store.clearCounters();
  let ops: WriteOp[] = [];
  let messages = 0;
  for await (const value of store.families.messages.values()) {
    const m = value as MessageRecord;
    if (!counted(m)) continue;
    for (const [at, delta] of countsOf(m)) ops.push(...counterAdds(keyOf(m, at), delta));
    messages += 1;
    if (ops.length >= 5000) {
      await store.commit(ops);
      ops = [];
    }
  }
  await store.commit(ops);
  await store.foldCounters();
  return messages;
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
