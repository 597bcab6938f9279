import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { loadConfig } from '../../../src/config/load.ts';
import { configSchema } from '../../../src/config/schema.ts';

/** Paths of every leaf of a plain object tree (arrays count as leaves). */
function leaves(value: unknown, prefix = ''): string[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [prefix];
  return Object.entries(value).flatMap(([k, v]) => leaves(v, prefix ? `${prefix}.${k}` : k));
}

describe('config/postilion.example.yaml', () => {
  const path = 'config/postilion.example.yaml';

  it('sets every option of the schema, and no other', () => {
    const written = parse(readFileSync(path, 'utf8')) as unknown;
    expect(leaves(written).sort()).to.deep.equal(leaves(configSchema.parse({})).sort());
  });

  it('loads to exactly the built-in defaults', () => {
    expect(loadConfig({ path, env: {} }).config).to.deep.equal(configSchema.parse({}));
  });

  it('comments every option (sections need none)', () => {
    const lines = readFileSync(path, 'utf8').split('\n');
    for (const [i, line] of lines.entries()) {
      if (!/^\s*[a-z_]+:\s*[^\s#]/.test(line)) continue;
      const previous = lines[i - 1] ?? '';
      expect(previous.trim().startsWith('#') || line.includes('#'), `option on line ${i + 1} has no comment: ${line}`).to.equal(true);
    }
  });
});
