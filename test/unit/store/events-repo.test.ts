import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventsRepo } from '../../../src/store/events-repo.ts';
import type { EventRecord } from '../../../src/store/records.ts';
import { Store, StoreWriteError } from '../../../src/store/store.ts';

const event = (type = 'message.reception'): EventRecord => ({
  v: 1,
  id: 'made-later',
  accountId: 'acc',
  type,
  createdAt: '2026-11-03T09:00:00.000Z',
  data: {},
});

describe('EventsRepo: the events outbox (over a real store)', () => {
  let dir: string;
  let store: Store;
  let events: EventsRepo;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-events-repo-'));
    store = await Store.open(dir);
    events = new EventsRepo(store);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('gives the newest id (none in an empty store) and pages after a cursor in the order the batches landed', async () => {
    expect(await events.newestId()).to.equal(null);
    expect(await events.after(null, 10)).to.deep.equal([]);
    // Made in one order, committed in the other: ids are made at commit, so they sort as the batches landed.
    const first = event('message.delivered');
    const second = event('message.bounced');
    const late = events.put(first);
    await store.commit(events.put(second));
    await store.commit(late);
    expect(second.id < first.id).to.equal(true);
    const third = event('message.failed');
    await store.commit(events.put(third));
    expect(await events.newestId()).to.equal(third.id);
    expect((await events.after(null, 10)).map((e) => e.type)).to.deep.equal(['message.bounced', 'message.delivered', 'message.failed']);
    expect((await events.after(null, 2)).map((e) => e.id)).to.deep.equal([second.id, first.id]);
    expect((await events.after(first.id, 10)).map((e) => e.id)).to.deep.equal([third.id]);
    expect(await events.after(third.id, 10)).to.deep.equal([]);
    expect((await events.getMany([third.id, 'gone', second.id])).map((e) => e?.type)).to.deep.equal(['message.failed', undefined, 'message.bounced']);
  });

  it('tells its listeners of each event once its batch is on disk, in landing order, and never of a failed batch', async () => {
    const heard: string[] = [];
    /** A read of each event as it is told: after the synced write, it finds it. */
    const reads: Array<Promise<unknown>> = [];
    events.onLanded((e) => {
      heard.push(e.id);
      reads.push(store.families.events.get(e.id));
    });
    const a = event();
    const b = event();
    await Promise.all([store.commit(events.put(a)), store.commit(events.put(b))]);
    store.injectFault(() => new Error('IO error: No space left on device'));
    expect(await store.commit(events.put(event())).catch((err: unknown) => err)).to.be.instanceOf(StoreWriteError);
    store.injectFault(null);
    const c = event();
    await store.commit([{ type: 'put', family: 'meta', key: 'x', value: 1 }, ...events.put(c)]);
    expect(heard).to.deep.equal([a.id, b.id, c.id]);
    expect((await Promise.all(reads)).map((e) => (e as EventRecord).id)).to.deep.equal([a.id, b.id, c.id]);
  });
});
