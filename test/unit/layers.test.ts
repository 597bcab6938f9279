import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The dependency direction of DESIGN.md §1, checked on the sources: the leaves import only
 * utilities, delivery/ (the dispatchers the engine calls) never imports queue/, and events/
 * never imports webhooks/ (webhooks subscribe to events).
 */
const SRC = join(dirname(fileURLToPath(import.meta.url)), '../../src');

function importsOf(folder: string): Array<{ file: string; target: string }> {
  const out: Array<{ file: string; target: string }> = [];
  for (const name of readdirSync(join(SRC, folder), { recursive: true }) as string[]) {
    if (!name.endsWith('.ts')) continue;
    const file = join(SRC, folder, name);
    for (const m of readFileSync(file, 'utf8').matchAll(/from '(\.{1,2}\/[^']+)'/g)) {
      const target = relative(SRC, join(dirname(file), m[1]!)).split('/')[0]!;
      if (target !== folder) out.push({ file: relative(SRC, file), target });
    }
  }
  return out;
}

const RULES: Array<{ folder: string; may: string[] }> = [
  { folder: 'store', may: ['util'] },
  { folder: 'config', may: ['util'] },
  { folder: 'bounce', may: ['util'] },
  { folder: 'events', may: ['store', 'util'] },
  { folder: 'delivery', may: ['bounce', 'domains', 'store', 'util'] },
  { folder: 'stats', may: ['events', 'store', 'util'] },
  { folder: 'tracking', may: ['events', 'message', 'store', 'util'] },
];

describe('layers (DESIGN.md §1)', () => {
  for (const { folder, may } of RULES) {
    it(`${folder}/ imports only ${may.join(', ')}`, () => {
      expect(importsOf(folder).filter((i) => !may.includes(i.target))).to.deep.equal([]);
    });
  }
  it('delivery/ never imports queue/, events/ never imports webhooks/', () => {
    expect(importsOf('delivery').filter((i) => i.target === 'queue')).to.deep.equal([]);
    expect(importsOf('events').filter((i) => i.target === 'webhooks')).to.deep.equal([]);
  });
  it('message/ never imports tracking/ or stats/ (they observe it, not the reverse)', () => {
    expect(importsOf('message').filter((i) => i.target === 'tracking' || i.target === 'stats')).to.deep.equal([]);
  });
});
