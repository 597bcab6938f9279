import { expect } from 'chai';
import pino from 'pino';
import { reloadAll, startAll, stopAll, type Assembly } from '../../../src/assemblies/lifecycle.ts';

/** An assembly that writes each step it takes into `steps`. */
function part(name: string, steps: string[], fail: Partial<Record<'drain' | 'close' | 'read', boolean>> = {}): Assembly {
  return {
    name,
    sections: [],
    start: async () => void steps.push(`start ${name}`),
    stopListening: async () => void steps.push(`listen ${name}`),
    drain: async () => {
      steps.push(`drain ${name}`);
      if (fail.drain) throw new Error(`${name} cannot drain`);
    },
    close: async () => {
      steps.push(`close ${name}`);
      if (fail.close) throw new Error(`${name} cannot close`);
    },
    reload: () => {
      steps.push(`read ${name}`);
      if (fail.read) throw new Error(`${name} cannot read its certificate`);
      return () => {
        steps.push(`apply ${name}`);
        return [name];
      };
    },
  };
}

describe('assembly lifecycle', () => {
  const log = pino({ level: 'silent' });

  it('starts down the list, and stops: every listener first, then drains and closes up the list', async () => {
    const steps: string[] = [];
    const list = [part('a', steps), part('b', steps), part('c', steps)];
    await startAll(list);
    await stopAll(list, 100, log);
    expect(steps).to.deep.equal([
      'start a',
      'start b',
      'start c',
      'listen a',
      'listen b',
      'listen c',
      'drain c',
      'drain b',
      'drain a',
      'close c',
      'close b',
      'close a',
    ]);
  });

  it('a step that fails does not keep the others from stopping', async () => {
    const steps: string[] = [];
    const lines: string[] = [];
    const list = [part('a', steps), part('b', steps, { drain: true, close: true })];
    await stopAll(list, 100, pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }));
    expect(steps).to.deep.equal(['listen a', 'listen b', 'drain b', 'drain a', 'close b', 'close a']);
    expect(lines.join('')).to.contain('b drain').and.to.contain('b close');
  });

  it('reads every new configuration before applying any: a read that fails applies nothing', () => {
    const steps: string[] = [];
    expect(reloadAll([part('a', steps), part('b', steps)], {} as never)).to.deep.equal(['a', 'b']);
    expect(steps).to.deep.equal(['read a', 'read b', 'apply a', 'apply b']);
    steps.length = 0;
    expect(() => reloadAll([part('a', steps), part('b', steps, { read: true })], {} as never)).to.throw('b cannot read');
    expect(steps).to.deep.equal(['read a', 'read b']);
  });
});
