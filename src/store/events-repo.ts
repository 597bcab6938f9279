import type { WriteOp } from './group-commit.ts';
import type { EventRecord } from './records.ts';
import type { Store } from './store.ts';
import { idFloor } from '../util/ids.ts';

/** Events in time order (ids are UUIDv7), and per account. */
export class EventsRepo {
  constructor(private readonly store: Store) {}

  put(event: EventRecord): WriteOp[] {
    return [
      { type: 'put', family: 'events', key: event.id, value: event },
      { type: 'put', family: 'eventsByAccount', key: `${event.accountId}:${event.id}`, value: event.id },
    ];
  }

  /** The newest events of an account, newest first, optionally of one type. */
  async recent(accountId: string, limit: number, type?: string): Promise<EventRecord[]> {
    const prefix = `${accountId}:`;
    const out: EventRecord[] = [];
    for await (const id of this.store.families.eventsByAccount.values({ gt: prefix, lt: `${prefix}\xff`, reverse: true })) {
      const event = await this.store.get<EventRecord>('events', id as string);
      if (event && (type === undefined || event.type === type)) out.push(event);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Deletes events made before `beforeMs` (their ids are UUIDv7), in batches; returns how many. */
  async purgeBefore(beforeMs: number): Promise<number> {
    let purged = 0;
    for (;;) {
      const old = (await this.store.families.events.values({ lt: idFloor(beforeMs), limit: 1000 }).all()) as EventRecord[];
      if (old.length === 0) return purged;
      await this.store.commit(old.flatMap((event): WriteOp[] => [
        { type: 'del', family: 'events', key: event.id },
        { type: 'del', family: 'eventsByAccount', key: `${event.accountId}:${event.id}` },
      ]));
      purged += old.length;
    }
  }
}
