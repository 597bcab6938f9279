import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fenceKey, JOB_KINDS, JobIndex, type DueEntry, type JobKindName } from '../../../src/store/job-index.ts';
import { Store } from '../../../src/store/store.ts';

const T0 = Date.parse('2026-11-27T12:00:00Z');

describe("JobIndex: the fences closing each kind's range", () => {
  let dir: string;
  let store: Store;
  let index: JobIndex;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-index-'));
    store = await Store.open(dir);
    index = new JobIndex(store);
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const entries = async (kind: JobKindName): Promise<DueEntry[]> => {
    const out: DueEntry[] = [];
    for await (const e of index.entries(kind)) out.push(e);
    return out;
  };

  it('are never read as entries (due, nextDue, entries), and fence() written again is one key per kind', async () => {
    await index.fence();
    await index.fence();
    const all = await store.families.schedule.keys().all();
    expect(all).to.deep.equal(JOB_KINDS.map(fenceKey).sort());
    for (const kind of JOB_KINDS) {
      expect(await index.due(kind, T0 + 10 ** 12, 100)).to.deep.equal([]);
      expect(await index.nextDue(kind, 0)).to.equal(null);
      expect(await entries(kind)).to.deep.equal([]);
    }
    await store.commit([index.put('message', 'm1', T0), index.put('webhook', 'w1', T0 + 1000)]);
    expect((await index.due('message', T0, 100)).map((e) => e.id)).to.deep.equal(['m1']);
    expect(await index.nextDue('message', T0)).to.equal(null);
    expect(await index.nextDue('webhook', T0)).to.equal(T0 + 1000);
    expect((await entries('webhook')).map((e) => e.id)).to.deep.equal(['w1']);
  });

  // LevelDB steps over deleted keys to the next live one before a read can see it has left its
  // range: the fence is that live key, so a read past the message entries stops there and not
  // after every webhook delivery deleted since the last compaction.
  it("are the first live key after a kind's entries, ahead of the next kind's deleted and live ones", async () => {
    await index.fence();
    const ops = [];
    for (let i = 0; i < 100; i++) ops.push(index.put('webhook', `w${i}`, T0));
    await store.commit(ops);
    await store.commit(Array.from({ length: 99 }, (_, i) => index.del('webhook', `w${i}`, T0)));
    await store.commit([index.put('message', 'm1', T0 + 5000)]);
    const [next] = await store.families.schedule.keys({ gt: `message:${String(T0 + 5000).padStart(15, '0')}:m1`, limit: 1 }).all();
    expect(next).to.equal(fenceKey('message'));
    const [afterRoutes] = await store.families.schedule.keys({ gt: 'route:', limit: 1 }).all();
    expect(afterRoutes).to.equal(fenceKey('route'));
    expect((await entries('webhook')).map((e) => e.id)).to.deep.equal(['w99']);
  });
});
