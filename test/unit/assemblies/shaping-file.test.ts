import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readShaping } from '../../../src/assemblies/jobs.ts';
import { ConfigError, validateConfig } from '../../../src/config/load.ts';

describe('delivery.shaping_file', () => {
  let dir: string;
  const clock = { now: () => 0 };
  const delivery = (shaping_file: string) => validateConfig({ delivery: { shaping_file } }, 'test').delivery;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-shaping-file-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the bundled rules alone, or with the operator file over them', () => {
    expect(readShaping(delivery(''), clock).limitsOf('aspmx.l.google.com', undefined)).to.include({ concurrency: 10 });
    const file = join(dir, 'shaping.yaml');
    writeFileSync(file, 'version: 1\nproviders:\n  gmail: { connections: 2 }\n');
    expect(readShaping(delivery(file), clock).limitsOf('aspmx.l.google.com', undefined)).to.include({ concurrency: 2 });
  });

  it('stops the start with the file and the reason when it cannot be read or is wrong', () => {
    expect(() => readShaping(delivery(join(dir, 'missing.yaml')), clock)).to.throw(ConfigError, /delivery\.shaping_file: cannot read .*missing\.yaml/);
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'version: 1\nproviders:\n  gmail: { connections: lots }\n');
    expect(() => readShaping(delivery(file), clock)).to.throw(ConfigError, /delivery\.shaping_file: .*bad\.yaml: providers\.gmail\.connections/);
  });
});
