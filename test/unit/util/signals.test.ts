import { expect } from 'chai';
import { Signals } from '../../../src/util/signals.ts';

interface Map {
  'a.happened': number;
  'b.happened': string[];
}

describe('Signals', () => {
  it('hands each emitted value to the listeners of its name, in the order they subscribed', () => {
    const signals = new Signals<Map>();
    const seen: string[] = [];
    signals.on('a.happened', (n) => seen.push(`first ${n}`));
    signals.on('b.happened', (ids) => seen.push(`b ${ids.join(',')}`));
    signals.on('a.happened', (n) => seen.push(`second ${n}`));
    signals.emit('a.happened', 1);
    signals.emit('b.happened', ['x', 'y']);
    expect(seen).to.deep.equal(['first 1', 'second 1', 'b x,y']);
  });

  it('emits to nobody without a listener, and a listener that throws reaches the emitter', () => {
    const signals = new Signals<Map>();
    signals.emit('a.happened', 1);
    signals.on('a.happened', () => {
      throw new Error('listener failed');
    });
    expect(() => signals.emit('a.happened', 2)).to.throw('listener failed');
  });
});
