import { expect } from 'chai';
import { boundHeapGrowth, HEAP_GROWING_PERCENT } from '../../../src/util/heap.ts';

describe('boundHeapGrowth', () => {
  it('asks V8 to grow the heap by at most HEAP_GROWING_PERCENT past the live set', () => {
    const set: string[] = [];
    expect(boundHeapGrowth([], (flags) => set.push(flags))).to.equal(true);
    expect(set).to.deep.equal([`--heap-growing-percent=${HEAP_GROWING_PERCENT}`]);
  });

  it("keeps the operator's own --heap-growing-percent (either spelling)", () => {
    const set: string[] = [];
    expect(boundHeapGrowth(['--heap-growing-percent=20'], (flags) => set.push(flags))).to.equal(false);
    expect(boundHeapGrowth(['--inspect', '--heap_growing_percent=80'], (flags) => set.push(flags))).to.equal(false);
    expect(set).to.deep.equal([]);
  });
});
