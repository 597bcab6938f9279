import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configSchema } from '../../../src/config/schema.ts';
import { checkStorage } from '../../../src/doctor/storage.ts';
import type { SpaceReading } from '../../../src/store/storage-guard.ts';

const MiB = 1024 * 1024;

describe('doctor: free space of the data and keys directories', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-doctor-storage-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const config = () =>
    configSchema.parse({ data: { dir: join(dir, 'data') }, keys: { dir: join(dir, 'keys') }, storage: { min_free_bytes: 64 * MiB, min_free_percent: 1 } });
  const run = (data: SpaceReading, keys: SpaceReading) => checkStorage(config(), (d) => (d.endsWith('data') ? data : keys));
  const line = (checks: ReturnType<typeof checkStorage>, name: string) => checks.find((c) => c.check === name)!;

  it("reports both directories' free space against the guard's floor: OK above twice, WARN within, FAIL below", () => {
    const fine = run({ free: 500 * MiB, total: 1000 * MiB }, { free: 500 * MiB, total: 1000 * MiB });
    expect(line(fine, 'storage data')).to.deep.include({ status: 'OK', reason: `${join(dir, 'data')}: 500.0 MiB free of 1000.0 MiB (floor 64.0 MiB)` });
    expect(line(fine, 'storage keys').status).to.equal('OK');
    expect(line(run({ free: 100 * MiB, total: 1000 * MiB }, { free: 500 * MiB, total: 1000 * MiB }), 'storage data').status).to.equal('WARN');
    const low = line(run({ free: 10 * MiB, total: 1000 * MiB }, { free: 500 * MiB, total: 1000 * MiB }), 'storage data');
    expect(low.status).to.equal('FAIL');
    expect(low.reason).to.equal(
      `10.0 MiB free on the filesystem of ${join(dir, 'data')}, below storage.min_free_bytes 64.0 MiB: new mail is refused and the daemon does not start`,
    );
    expect(line(run({ free: 500 * MiB, total: 1000 * MiB }, { free: 100 * 1024, total: 1000 * MiB }), 'storage keys').status).to.equal('WARN');
  });
});
