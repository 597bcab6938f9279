import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addCounts, cloneCounts, CounterCache } from '../../../src/store/counter-cache.ts';
import { countKey } from '../../../src/store/counter-keys.ts';
import { CountersRepo } from '../../../src/store/counters-repo.ts';
import type { Counts } from '../../../src/store/group-commit.ts';
import { Store } from '../../../src/store/store.ts';

const add = (key: string, value: Counts) => ({ type: 'add' as const, family: 'counters' as const, key, value });

/** A store opened with its counters, as the daemon opens it. */
async function open(dir: string): Promise<{ store: Store; counters: CountersRepo }> {
  const counters = new CountersRepo();
  return { store: await Store.open(dir, { journal: counters }), counters };
}

describe('CounterCache (the add write op)', () => {
  it('adds to what the store holds, reading each row once, and keeps the totals only when told', async () => {
    const stored = new Map<string, Counts>([['a', { r: 2, bc: { X: 1 } }]]);
    const reads: string[][] = [];
    const cache = new CounterCache(async (keys) => (reads.push(keys), keys.map((k) => stored.get(k))));
    const first = await cache.resolve([add('a', { r: 1, bc: { X: 1, Y: 1 } }), add('b', { d: 1 }), add('a', { r: 1 })]);
    expect(Object.fromEntries(first)).to.deep.equal({ a: { r: 4, bc: { X: 2, Y: 1 } }, b: { d: 1 } });
    expect(reads).to.deep.equal([['a', 'b']]);
    // Not kept (the batch failed): the next batch starts again from the store.
    const again = await cache.resolve([add('a', { r: 1 })]);
    expect(again.get('a')).to.deep.equal({ r: 3, bc: { X: 1 } });
    cache.keep(again);
    const third = await cache.resolve([add('a', { r: 1 })]);
    expect(third.get('a')).to.deep.equal({ r: 4, bc: { X: 1 } });
    expect(reads).to.have.length(2);
    // The stored value itself is never changed in place.
    expect(stored.get('a')).to.deep.equal({ r: 2, bc: { X: 1 } });
  });

  it('writes a row an empty add touches only while it is not in the store', async () => {
    const stored = new Map<string, Counts>([['known', {}]]);
    const cache = new CounterCache(async (keys) => keys.map((k) => stored.get(k)));
    const first = await cache.resolve([add('index', {}), add('known', {})]);
    expect([...first.keys()]).to.deep.equal(['index']);
    cache.keep(first);
    expect([...(await cache.resolve([add('index', {})])).keys()]).to.deep.equal([]);
  });

  it('forgets the least recently used rows past its bound', async () => {
    let reads = 0;
    const cache = new CounterCache(async (keys) => ((reads += keys.length), keys.map(() => undefined)), 2);
    for (const key of ['a', 'b', 'c']) cache.keep(await cache.resolve([add(key, { n: 1 })]));
    reads = 0;
    await cache.resolve([add('c', { n: 1 }), add('b', { n: 1 })]);
    expect(reads).to.equal(0);
    await cache.resolve([add('a', { n: 1 })]);
    expect(reads).to.equal(1);
  });

  it('addCounts and cloneCounts work branch by branch', () => {
    const base = { r: 1, dt: { 'gmail.com': { ms: 10, n: 1 } } };
    const copy = cloneCounts(base);
    addCounts(copy, { r: 2, dt: { 'gmail.com': { ms: 5, n: 1 }, 'yahoo.com': { ms: 1, n: 1 } } });
    expect(copy).to.deep.equal({ r: 3, dt: { 'gmail.com': { ms: 15, n: 2 }, 'yahoo.com': { ms: 1, n: 1 } } });
    expect(base).to.deep.equal({ r: 1, dt: { 'gmail.com': { ms: 10, n: 1 } } });
  });

  it('through the store: concurrent commits never lose an increment', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'postilion-counters-'));
    const { store, counters } = await open(dir);
    try {
      await Promise.all(
        Array.from({ length: 200 }, (_, i) => store.commit([add('h|acc|a||2026110309', { r: 1, bc: { [`C${i % 3}`]: 1 } }), add('i|acc|example.com', {})])),
      );
      await counters.fold();
      expect(await store.families.counters.get('h|acc|a||2026110309')).to.deep.equal({ r: 200, bc: { C0: 67, C1: 67, C2: 66 } });
      expect(await store.families.counters.get('i|acc|example.com')).to.deep.equal({});
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe("the counters' log (store/counter-log.ts)", () => {
    let dir: string;
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'postilion-counter-log-'));
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    it("writes a batch's adds as one log row in that batch, and a fold moves them into the rows", async () => {
      const { store, counters } = await open(dir);
      try {
        await store.commit([
          { type: 'put', family: 'meta', key: 'x', value: 1 },
          add('h|acc|a||2026110309', { r: 1 }),
          add('h|acc|a||2026110309', { r: 2 }),
          add('d|acc|a||20261103', { r: 3 }),
        ]);
        expect(await store.families.counterLog.values().all()).to.deep.equal([{ a: { 'h|acc|a||2026110309': { r: 3 }, 'd|acc|a||20261103': { r: 3 } } }]);
        expect(await store.families.counters.get('h|acc|a||2026110309')).to.equal(undefined);
        await counters.fold();
        expect(await store.families.counterLog.keys().all()).to.deep.equal([]);
        expect(await store.families.counters.get('h|acc|a||2026110309')).to.deep.equal({ r: 3 });
        await store.commit([add('h|acc|a||2026110309', { r: 1 })]);
        await counters.fold();
        expect(await store.families.counters.get('h|acc|a||2026110309')).to.deep.equal({ r: 4 });
      } finally {
        await store.close();
      }
    });

    it('folds on its own within about a second, and on close', async () => {
      const { store } = await open(dir);
      await store.commit([add('h|acc|a||2026110309', { r: 1 })]);
      const deadline = Date.now() + 5000;
      while ((await store.families.counters.get('h|acc|a||2026110309')) === undefined) {
        if (Date.now() > deadline) throw new Error('no fold within 5 s');
        await new Promise((r) => setTimeout(r, 50));
      }
      await store.commit([add('h|acc|a||2026110309', { r: 1 })]);
      await store.close();
      const { store: again } = await open(dir);
      try {
        expect(await again.families.counterLog.keys().all()).to.deep.equal([]);
        expect(await again.families.counters.get('h|acc|a||2026110309')).to.deep.equal({ r: 2 });
      } finally {
        await again.close();
      }
    });

    it('reads back the log rows a crash left, folds them with the new ones, and numbers new rows after them', async () => {
      const { store: first } = await open(dir);
      await first.levels.counterLog.put('000000000041', { a: { 'h|acc|a||2026110309': { r: 5 } } });
      await first.levels.counterLog.put('000000000042', { a: { 'h|acc|a||2026110309': { r: 1, bc: { X: 1 } } } });
      await first.close();
      const { store, counters } = await open(dir);
      try {
        await store.commit([add('h|acc|a||2026110309', { r: 1 })]);
        expect(await store.families.counterLog.keys().all()).to.deep.equal(['000000000041', '000000000042', '000000000043']);
        await counters.fold();
        expect(await store.families.counters.get('h|acc|a||2026110309')).to.deep.equal({ r: 7, bc: { X: 1 } });
        expect(await store.families.counterLog.keys().all()).to.deep.equal([]);
      } finally {
        await store.close();
      }
    });

    it('expands count ops into their rows only when folding; a store opened without the counters refuses counter ops and leaves their log as it is', async () => {
      const count = (key: string, value: Counts) => ({ type: 'count' as const, family: 'counters' as const, key, value });
      const key = countKey({ accountId: 'acc', at: Date.parse('2026-11-03T09:10:00Z'), senderDomain: 'example.com', recipientDomain: 'gmail.com', tags: [] });
      const plain = await Store.open(dir);
      expect(await plain.commit([count(key, { r: 1 })]).catch((err: unknown) => err)).to.be.instanceOf(TypeError);
      expect(await plain.commit([add('h|acc|a||2026110309', { r: 1 })]).catch((err: unknown) => err)).to.be.instanceOf(TypeError);
      // What a daemon logged and did not fold (a crash) stays on disk through a tool's open and close.
      await plain.levels.counterLog.put('000000000007', { a: { 'h|acc|a||2026110309': { r: 1 } }, c: { [key]: { r: 2 } } });
      await plain.close();
      const { store, counters } = await open(dir);
      try {
        expect(await store.families.counterLog.keys().all()).to.deep.equal(['000000000007']);
        await store.commit([count(key, { r: 1 }), count(key, { r: 1 })]);
        expect(await store.families.counterLog.values().all()).to.deep.equal([
          { a: { 'h|acc|a||2026110309': { r: 1 } }, c: { [key]: { r: 2 } } },
          { c: { [key]: { r: 2 } } },
        ]);
        await counters.fold();
        expect(await store.families.counters.get('h|acc|a||2026110309')).to.deep.equal({ r: 5 });
        expect(await store.families.counters.get('d|acc|a||20261103')).to.deep.equal({ r: 4 });
        expect(await store.families.counters.get('h|acc|s|example.com|2026110309')).to.deep.equal({ r: 4 });
        expect(await store.families.counterLog.keys().all()).to.deep.equal([]);
      } finally {
        await store.close();
      }
    });
  });
});
