import { expect } from 'chai';
import { ReadCache } from '../../../src/store/read-cache.ts';

describe('ReadCache', () => {
  /** A store of one family's records that counts reads, and whose reads can be held. */
  function source(records: Record<string, { n: number }>) {
    let reads = 0;
    let gate: Promise<void> | null = null;
    return {
      records,
      get reads() {
        return reads;
      },
      hold(): () => void {
        let open!: () => void;
        gate = new Promise((resolve) => (open = resolve));
        return open;
      },
      read: (key: string) => async () => {
        reads += 1;
        const value = records[key];
        if (gate) await gate;
        return value === undefined ? undefined : { ...value };
      },
    };
  }

  it('keeps a record read, frozen, until a write of its key; absent keys and other families are not kept', async () => {
    const s = source({ a: { n: 1 } });
    const cache = new ReadCache(new Map([['messages', 10]]));
    const first = await cache.get('messages', 'a', s.read('a'));
    expect(await cache.get('messages', 'a', s.read('a'))).to.equal(first);
    expect(Object.isFrozen(first)).to.equal(true);
    expect(s.reads).to.equal(1);
    await cache.writing([{ family: 'messages', key: 'a' }], async () => {
      s.records.a = { n: 2 };
    });
    expect(await cache.get('messages', 'a', s.read('a'))).to.deep.equal({ n: 2 });
    expect(s.reads).to.equal(2);
    await cache.get('messages', 'gone', s.read('gone'));
    await cache.get('messages', 'gone', s.read('gone'));
    expect(s.reads).to.equal(4);
    expect(cache.caches('bodies')).to.equal(false);
  });

  it('does not keep a read that a write of the same key overtook', async () => {
    const s = source({ a: { n: 1 } });
    const cache = new ReadCache(new Map([['messages', 10]]));
    const open = s.hold();
    const racing = cache.get('messages', 'a', s.read('a'));
    await cache.writing([{ family: 'messages', key: 'a' }], async () => {
      s.records.a = { n: 2 };
    });
    open();
    expect(await racing).to.deep.equal({ n: 1 });
    expect(await cache.get('messages', 'a', s.read('a'))).to.deep.equal({ n: 2 });
  });

  it('reads several at once, only those not kept, in one read, and keeps them unless a write overtook the read', async () => {
    const s = source({ a: { n: 1 }, b: { n: 2 }, c: { n: 3 } });
    const cache = new ReadCache(new Map([['messages', 10]]));
    const batches: string[][] = [];
    const readMany = async (keys: string[]) => {
      batches.push(keys);
      return Promise.all(keys.map((key) => s.read(key)()));
    };
    const a = await cache.get('messages', 'a', s.read('a'));
    const open = s.hold();
    const racing = cache.getMany('messages', ['a', 'b', 'gone', 'c'], readMany);
    // A write of c lands while the read is under way: what the read saw of c is not kept.
    await cache.writing([{ family: 'messages', key: 'c' }], async () => {
      s.records.c = { n: 30 };
    });
    open();
    const got = await racing;
    expect(got[0]).to.equal(a);
    expect(got.slice(1)).to.deep.equal([{ n: 2 }, undefined, { n: 3 }]);
    expect(batches).to.deep.equal([['b', 'gone', 'c']]);
    expect(Object.isFrozen(got[1])).to.equal(true);
    // b kept; c read again (the write overtook the read); the absent key read again.
    expect(await cache.getMany('messages', ['b', 'c', 'gone'], readMany)).to.deep.equal([{ n: 2 }, { n: 30 }, undefined]);
    expect(batches[1]).to.deep.equal(['c', 'gone']);
    const inside = cache as unknown as { reads: Map<string, unknown> };
    expect(inside.reads.size).to.equal(0);
  });

  it('keeps a family to its limit, the least recently read going first, and keeps nothing per key once reads and writes are done', async () => {
    const s = source({ a: { n: 1 }, b: { n: 2 }, c: { n: 3 } });
    const cache = new ReadCache(
      new Map([
        ['messages', 2],
        ['accounts', 10],
      ]),
    );
    await cache.get('accounts', 'a', s.read('a'));
    for (const key of ['a', 'b', 'a', 'c']) await cache.get('messages', key, s.read(key));
    // a, b (read and kept); a (kept: now the most recent); c (read; b, the least recent, goes).
    expect(s.reads).to.equal(4);
    expect(await cache.getMany('messages', ['a', 'c'], async () => [])).to.deep.equal([{ n: 1 }, { n: 3 }]);
    await cache.get('messages', 'b', s.read('b'));
    expect(s.reads).to.equal(5);
    // The other family kept its own.
    await cache.get('accounts', 'a', s.read('a'));
    expect(s.reads).to.equal(5);
    await Promise.all(['a', 'b', 'c'].map((key) => cache.writing([{ family: 'messages', key }], async () => undefined)));
    const inside = cache as unknown as { inFlight: Map<string, number>; reads: Map<string, unknown> };
    expect(inside.inFlight.size).to.equal(0);
    expect(inside.reads.size).to.equal(0);
  });
});
