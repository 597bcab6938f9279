import type { WriteOp } from './group-commit.ts';
import type { EventRecord } from './records.ts';
import type { Store } from './store.ts';

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
}
