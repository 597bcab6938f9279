import type { EventsRepo } from '../store/events-repo.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { EventRecord } from '../store/records.ts';
import { newId } from '../util/ids.ts';
import { iso, type Clock } from '../util/time.ts';
import type { Event } from './types.ts';

/** Turns events into write ops, for the caller to commit in the same batch as the state change. */
export class EventRecorder {
  constructor(
    private readonly repo: EventsRepo,
    private readonly clock: Clock,
  ) {}

  record(event: Event): WriteOp[] {
    const stored: EventRecord = {
      v: 1,
      id: newId(),
      accountId: event.accountId,
      type: event.type,
      createdAt: iso(this.clock.now()),
      data: { ...event.data },
    };
    return this.repo.put(stored);
  }
}
