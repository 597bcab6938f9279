import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../../src/store/store.ts';

describe('Store: puts of a whole current state (latest) in one batch', () => {
  let dir: string;
  let store: Store;
  let written: Array<{ type: string; key: string; value?: unknown }>;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-latest-'));
    store = await Store.open(dir);
    written = [];
    // What reaches LevelDB: the batches the committer hands to classic-level.
    const db = (store as unknown as { db: { _batch: (ops: never[], options: unknown) => Promise<void> } }).db;
    const batch = db._batch.bind(db);
    db._batch = (ops, options) => {
      written.push(...(ops as Array<{ type: string; key: string; value?: unknown }>));
      return batch(ops, options);
    };
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes only the last of a key, and every put that is not marked latest', async () => {
    await Promise.all([
      store.commit([
        { type: 'put', family: 'webhookCounters', key: 'w1', value: { n: 1 }, latest: true },
        { type: 'put', family: 'jobs', key: 'j1', value: { n: 1 } },
      ]),
      store.commit([
        { type: 'put', family: 'webhookCounters', key: 'w1', value: { n: 2 }, latest: true },
        { type: 'put', family: 'jobs', key: 'j1', value: { n: 2 } },
      ]),
      store.commit([{ type: 'put', family: 'webhookCounters', key: 'w2', value: { n: 1 }, latest: true }]),
    ]);
    expect(await store.get('webhookCounters', 'w1')).to.deep.equal({ n: 2 });
    expect(await store.get('webhookCounters', 'w2')).to.deep.equal({ n: 1 });
    expect(await store.get('jobs', 'j1')).to.deep.equal({ n: 2 });
    const counters = written.filter((op) => op.key.includes('w1'));
    const jobs = written.filter((op) => op.key.includes('j1'));
    // The first batch may hold the first commit alone; the others are gathered into the next.
    expect(jobs).to.have.length(2);
    expect(counters.length).to.be.within(1, 2);
    expect(JSON.parse(String(counters.at(-1)!.value))).to.deep.equal({ n: 2 });
    if (counters.length === 2) expect(JSON.parse(String(counters[0]!.value))).to.deep.equal({ n: 1 });
  });

  it('in one commit, two latest puts of a key write one row', async () => {
    await store.commit([
      { type: 'put', family: 'webhookCounters', key: 'w', value: { n: 1 }, latest: true },
      { type: 'put', family: 'webhookCounters', key: 'w', value: { n: 2 }, latest: true },
    ]);
    expect(written.filter((op) => op.key.endsWith('w'))).to.have.length(1);
    expect(await store.get('webhookCounters', 'w')).to.deep.equal({ n: 2 });
  });
});
