import type { EventObserver } from '../events/types.ts';
import type { CounterKey } from '../store/counter-keys.ts';
import type { CountersRepo } from '../store/counters-repo.ts';
import type { Counts } from '../store/group-commit.ts';
import type { EventRecord, MessageRecord } from '../store/records.ts';
import { domainOf } from '../util/email.ts';

/**
 * What the statistics count: each counted event adds its delta to the counters (their rows:
 * store/counter-keys.ts), in the batch of the event, so that a count never runs ahead of or
 * behind its event. The statistics queries read those rows and never the messages.
 *
 * Counted (outbound mail only; sandbox mail and Postilion's own DSNs are left out):
 *   r reception · d delivered, with `dt.<recipient domain>.{ms,n}` the time from acceptance (or
 *   the scheduled first attempt) to delivery · df the message's first deferral · b bounced, with
 *   `bc.<classification>` · f failed · s suppressed · o, c the message's first open or click by a
 *   person (bots are flagged on the event and not counted here).
 */
export type CounterDelta = Counts;

/**
 * The observer the EventRecorder calls for each event it records: one `count` op naming the
 * event's account, hour, sender and recipient domain and tag set, expanded into the adds of its
 * rows when the counters' log is folded. `onEvent` (cluster mode): the event keeps what it
 * counts (EventRecord.count), for its publication to count it in the cluster's counters.
 */
export function countersObserver(counters: Pick<CountersRepo, 'count'>, options: { onEvent?: boolean } = {}): EventObserver {
  return (event, subject) => {
    if (!subject) return [];
    const m = subject.message;
    if (!counted(m)) return [];
    const delta = deltaOf(event, m, subject.first === true);
    if (!delta) return [];
    const op = counters.count(keyOf(m, Date.parse(event.createdAt)), delta);
    if (options.onEvent) event.count = { key: op.key, value: delta };
    return [op];
  };
}

/** Whether a message counts in the statistics at all. */
export function counted(m: MessageRecord): boolean {
  return m.direction === 'outbound' && m.sandbox === null && !m.isBounceNotification;
}

export function keyOf(m: MessageRecord, at: number): CounterKey {
  return { accountId: m.accountId, at, senderDomain: m.domain, recipientDomain: domainOf(m.recipient), tags: m.tags };
}

/** What one event adds, or null when it adds nothing. */
export function deltaOf(event: Pick<EventRecord, 'type'>, m: MessageRecord, first: boolean): CounterDelta | null {
  switch (event.type) {
    case 'message.reception':
      return { r: 1 };
    case 'message.delivered':
      return deliveredDelta(m);
    case 'message.transient_error':
      // A message deferred three times is one deferred message: only its first deferral counts.
      return m.attempts.slice(0, -1).some((a) => a.status === 'Deferred') ? null : { df: 1 };
    case 'message.bounced':
      return { b: 1, bc: { [m.bounceClassification || 'Uncategorized']: 1 } };
    case 'message.failed':
      return { f: 1 };
    case 'message.suppressed':
      return { s: 1 };
    case 'message.opened':
      return first ? { o: 1 } : null;
    case 'message.clicked':
      return first ? { c: 1 } : null;
    default:
      return null;
  }
}

export function deliveredDelta(m: MessageRecord): CounterDelta {
  const start = Date.parse(m.schedule?.firstAttempt ?? m.createdAt);
  const ms = Math.max(0, Date.parse(m.deliveredAt ?? m.updatedAt) - start);
  return { d: 1, dt: { [domainOf(m.recipient)]: { ms, n: 1 } } };
}
