import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, MetaRepo, SCHEMA_VERSION } from '../../../src/store/meta.ts';
import { Store } from '../../../src/store/store.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';

/** A first start makes its data directory at the schema of this release: there is nothing to migrate. */
describe('a brand-new data directory', function () {
  this.timeout(30_000);
  let server: TestServer | null = null;
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-new-data-'));
  });
  afterEach(async () => {
    await server?.stop();
    server = null;
    rmSync(dir, { recursive: true, force: true });
  });

  it('is created at the current schema, with no "store migrated" line on the first start or the next', async () => {
    const logLines: string[] = [];
    server = await startServer({ dir, logLines });

    expect(logLines.filter((l) => l.includes('"msg":"store migrated"'))).to.deep.equal([]);
    expect(logLines.some((l) => l.includes('"msg":"store opened"'))).to.equal(true);
    expect(server.daemon.core.migrations).to.deep.equal([]);
    expect(await server.daemon.core.meta.schemaVersion()).to.equal(SCHEMA_VERSION);

    logLines.length = 0;
    server = await server.restart();
    expect(logLines.filter((l) => l.includes('"msg":"store migrated"'))).to.deep.equal([]);
    expect(await server.daemon.core.meta.schemaVersion()).to.equal(SCHEMA_VERSION);
  });

  it('an empty store is written at the current schema; one holding anything of release 1 is still migrated step by step', async () => {
    const empty = await Store.open(join(dir, 'empty'));
    try {
      expect(await migrate(empty, { buildCounters: async () => 0 })).to.deep.equal([]);
      expect(await new MetaRepo(empty).schemaVersion()).to.equal(SCHEMA_VERSION);
    } finally {
      await empty.close();
    }

    // Release 1 recorded no schema version: a due-time entry of its own form is all it takes.
    const old = await Store.open(join(dir, 'release-1'));
    try {
      await old.commit([
        { type: 'put', family: 'schedule', key: '1700000000000:0190f3a0-0000-7000-8000-000000000001', value: '0190f3a0-0000-7000-8000-000000000001' },
      ]);
      const steps = await migrate(old, { buildCounters: async () => 0 });
      expect(steps.map((s) => s.slice(0, 'schema 1 → 2'.length))).to.deep.equal(['schema 1 → 2', 'schema 2 → 3', 'schema 3 → 4']);
      expect(await old.families.schedule.keys().all()).to.deep.equal(['message:1700000000000:0190f3a0-0000-7000-8000-000000000001']);
      expect(await new MetaRepo(old).schemaVersion()).to.equal(SCHEMA_VERSION);
    } finally {
      await old.close();
    }
  });
});
