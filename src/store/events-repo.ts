import type { WriteOp } from './group-commit.ts';
import type { EventRecord } from './records.ts';
import type { StoreAccess } from './store.ts';
import { idFloor, newId } from '../util/ids.ts';

/**
 * Events in the order they landed (ids are UUIDv7): the outbox its consumers (the webhook
 * fan-out, the metrics) read. An event's id is made when its batch is committed, not when the
 * event is: a consumer reads on from the newest event it has done (its cursor), and an event made
 * earlier whose batch landed later would sort behind it.
 */
export class EventsRepo {
  constructor(private readonly store: StoreAccess) {}

  put(event: EventRecord): WriteOp[] {
    return [{ type: 'put', family: 'events', key: event.id, value: event, keyAtCommit: () => (event.id = newId()) }];
  }

  /** Several events by id in one read, in the order asked (undefined where absent: purged). */
  getMany(ids: readonly string[]): Promise<Array<EventRecord | undefined>> {
    return this.store.getMany<EventRecord>('events', ids);
  }

  /** The id of the newest event stored (null: none): where a new consumer's cursor starts. */
  async newestId(): Promise<string | null> {
    const [newest] = await this.store.families.events.keys({ reverse: true, limit: 1 }).all();
    return newest ?? null;
  }

  /** Up to `limit` events after the cursor (null: from the oldest), in id order: the order their batches landed. */
  async after(cursor: string | null, limit: number): Promise<EventRecord[]> {
    const range = cursor === null ? {} : { gt: cursor };
    return (await this.store.families.events.values({ ...range, limit }).all()) as EventRecord[];
  }

  /**
   * Calls `listener` (which must not throw) with every event stored, once the batch holding it
   * is on disk (Store.onPut): the events of a batch after those of the batches that landed before it.
   */
  onLanded(listener: (event: EventRecord) => void): void {
    this.store.onPut('events', (_key, value) => listener(value as EventRecord));
  }

  /**
   * The newest events of an account, newest first, optionally of one type: a scan of every
   * account's events from the newest, for tests (nothing of the API lists events, and an index
   * written with every event would cost each of them a write).
   */
  async recent(accountId: string, limit: number, type?: string): Promise<EventRecord[]> {
    const out: EventRecord[] = [];
    for await (const event of this.store.families.events.values({ reverse: true })) {
      const e = event as EventRecord;
      if (e.accountId === accountId && (type === undefined || e.type === type)) out.push(e);
      if (out.length >= limit) break;
    }
    return out;
  }

  /**
   * The events of one message, oldest first: a scan of every event since the message was made
   * (`fromMs`), for the operator's `messages show` (an index by message would cost every event a
   * write; this costs one read of the events since, which the retention bounds).
   */
  async ofMessage(messageId: string, fromMs: number): Promise<EventRecord[]> {
    const out: EventRecord[] = [];
    for await (const event of this.store.families.events.values({ gte: idFloor(fromMs) })) {
      const e = event as EventRecord;
      if (e.type.startsWith('message.') && e.data.id === messageId) out.push(e);
    }
    return out;
  }

  /** Deletes events made before `beforeMs` (their ids are UUIDv7), in batches; returns how many. */
  async purgeBefore(beforeMs: number): Promise<number> {
    let purged = 0;
    for (;;) {
      const old = (await this.store.families.events.values({ lt: idFloor(beforeMs), limit: 1000 }).all()) as EventRecord[];
      if (old.length === 0) return purged;
      await this.store.commit(
        old.flatMap((event): WriteOp[] => [
          { type: 'del', family: 'events', key: event.id },
          // The per-account index earlier releases wrote: emptied as its events go.
          { type: 'del', family: 'eventsByAccount', key: `${event.accountId}:${event.id}` },
        ]),
      );
      purged += old.length;
    }
  }
}
