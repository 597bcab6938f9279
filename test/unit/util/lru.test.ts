import { expect } from 'chai';
import { Lru } from '../../../src/util/lru.ts';

describe('Lru', () => {
  it('holds at most its cap, dropping the least recently set first', () => {
    const lru = new Lru<string, number>(3);
    for (const [i, key] of ['a', 'b', 'c', 'd', 'e'].entries()) lru.set(key, i);
    expect(lru.size).to.equal(3);
    expect([...lru]).to.deep.equal([
      ['c', 2],
      ['d', 3],
      ['e', 4],
    ]);
    expect(lru.has('a')).to.equal(false);
    expect(lru.get('b')).to.equal(undefined);
  });

  it('makes an entry the most recent when it is read with get or set again, not with peek or has', () => {
    const lru = new Lru<string, number>(3);
    lru.set('a', 1).set('b', 2).set('c', 3);
    expect(lru.get('a')).to.equal(1);
    lru.set('d', 4);
    // b was the least recent once a was read.
    expect([...lru].map(([key]) => key)).to.deep.equal(['c', 'a', 'd']);
    lru.set('c', 30);
    expect([...lru].map(([key]) => key)).to.deep.equal(['a', 'd', 'c']);
    expect(lru.peek('a')).to.equal(1);
    expect(lru.has('a')).to.equal(true);
    lru.set('e', 5);
    // peek and has left a the least recent.
    expect([...lru]).to.deep.equal([
      ['d', 4],
      ['c', 30],
      ['e', 5],
    ]);
  });

  it('reads the newest entry again without disturbing the order, also after it was deleted', () => {
    const lru = new Lru<string, number>(2);
    lru.set('a', 1).set('b', 2);
    expect([lru.get('b'), lru.get('b')]).to.deep.equal([2, 2]);
    lru.delete('b');
    lru.set('c', 3);
    expect(lru.get('a')).to.equal(1);
    lru.set('b', 20);
    // c was the least recent: a was read after it.
    expect([...lru]).to.deep.equal([
      ['a', 1],
      ['b', 20],
    ]);
    lru.clear();
    expect([lru.size, lru.get('b')]).to.deep.equal([0, undefined]);
  });

  it('forgets an entry its time to live after it was set; reads do not extend it, a new set does', () => {
    let now = 1_000;
    const lru = new Lru<string, string>(10, 5_000, () => now);
    lru.set('a', 'A').set('b', 'B');
    now = 5_999;
    expect([lru.get('a'), lru.peek('b'), lru.has('b')]).to.deep.equal(['A', 'B', true]);
    lru.set('b', 'B2');
    now = 6_000;
    expect([lru.get('a'), lru.has('a'), lru.get('b')]).to.deep.equal([undefined, false, 'B2']);
    expect(lru.size).to.equal(1);
    lru.set('c', 'C');
    now = 10_998;
    expect([...lru]).to.deep.equal([
      ['b', 'B2'],
      ['c', 'C'],
    ]);
    now = 10_999;
    // Not listed once expired; dropped when read.
    expect([...lru]).to.deep.equal([['c', 'C']]);
    expect(lru.peek('b')).to.equal(undefined);
    expect(lru.size).to.equal(1);
  });

  it('lets entries be deleted while it is iterated', () => {
    const lru = new Lru<string, number>(5);
    for (const [i, key] of ['a', 'b', 'c', 'd'].entries()) lru.set(key, i);
    for (const [key, value] of lru) if (value % 2 === 0) lru.delete(key);
    expect([...lru]).to.deep.equal([
      ['b', 1],
      ['d', 3],
    ]);
  });

  it('refuses a cap below one', () => {
    expect(() => new Lru(0)).to.throw(RangeError);
  });
});
