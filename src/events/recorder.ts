import type { EventsRepo } from '../store/events-repo.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { EventRecord } from '../store/records.ts';
import { newId } from '../util/ids.ts';
import { iso, type Clock } from '../util/time.ts';
import type { Event, EventObserver, EventSubject } from './types.ts';

/**
 * Turns events into write ops, for the caller to commit in the same batch as the state change,
 * with the ops of its observers (the statistics counters): what counts an event lands with it.
 */
export class EventRecorder {
  constructor(
    private readonly repo: EventsRepo,
    private readonly clock: Clock,
    /** What writes with each event (the statistics counters' ops). */
    private readonly observers: readonly EventObserver[] = [],
  ) {}

  /** `subject`: the message a message event is about, as it is after the change. */
  record(event: Event, subject?: EventSubject): WriteOp[] {
    const stored: EventRecord = {
      v: 1,
      id: newId(),
      accountId: event.accountId,
      type: event.type,
      createdAt: iso(this.clock.now()),
      data: { ...event.data },
    };
    const ops = this.repo.put(stored);
    for (const observer of this.observers) ops.push(...observer(stored, subject));
    return ops;
  }
}
