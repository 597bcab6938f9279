import { expect } from 'chai';
import { Handover } from '../../../src/util/handover.ts';

describe('Handover', () => {
  it('keeps a value for its number of reads, then forgets it', () => {
    const h = new Handover<string>(10);
    expect(h.put('a', 'A', 2)).to.equal(true);
    expect(h.take('a')).to.equal('A');
    expect(h.take('a')).to.equal('A');
    expect(h.take('a')).to.equal(undefined);
    expect(h.size).to.equal(0);
    h.put('p', 'P');
    expect([h.peek('p'), h.peek('p'), h.take('p'), h.peek('p')]).to.deep.equal(['P', 'P', 'P', undefined]);
    expect(h.put('none', 'N', 0)).to.equal(false);
    expect(h.take('none')).to.equal(undefined);
  });

  it('when full keeps what it holds while it is recent, and lets the oldest go once it is stale', () => {
    let now = 0;
    const h = new Handover<string>(2, 60_000, () => now);
    h.put('a', 'A');
    now = 1000;
    h.put('b', 'B');
    // Full, and 'a' was kept a second ago: the newcomer is not kept.
    expect(h.put('c', 'C')).to.equal(false);
    expect(h.take('c')).to.equal(undefined);
    // 'a' has waited past the limit for its reader: it makes room.
    now = 61_001;
    expect(h.put('c', 'C')).to.equal(true);
    expect(h.take('a')).to.equal(undefined);
    expect([h.take('b'), h.take('c')]).to.deep.equal(['B', 'C']);
  });

  it('drop forgets a value whatever reads it had left', () => {
    const h = new Handover<number>(10);
    h.put('x', 1, 3);
    h.drop('x');
    expect(h.take('x')).to.equal(undefined);
  });
});
