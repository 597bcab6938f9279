import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../../../src/cli/main.ts';
import { validateConfig } from '../../../src/config/load.ts';
import type { ConfigInput } from '../../../src/config/schema.ts';
import { openCore } from '../../../src/assemblies/core.ts';
import { fenceKey, JOB_KINDS, type DueEntry } from '../../../src/store/job-index.ts';
import { migrate, SCHEMA_VERSION } from '../../../src/store/meta.ts';
import { Store } from '../../../src/store/store.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { call, ManualClock, startServer, type TestServer } from '../../helpers/harness.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * Upgrading in place: a data and keys directory written by release 1 (commit 010e455: no schema
 * version in meta, due-time keys `<time>:<message id>`), as a tarball, with what it holds in
 * the JSON next to it. The daemon of this release opens it, migrates it to schema 2 once, and
 * serves and delivers what release 1 had queued.
 */

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '../../fixtures');

interface Fixture {
  account_id: string;
  admin_key: string;
  due: { recipient: string; message_id_header: string };
  scheduled: { recipient: string; message_id_header: string; first_attempt: string };
  clock: string;
}

const fixture = JSON.parse(readFileSync(join(FIXTURES, 'data-dir-release-1.json'), 'utf8')) as Fixture;
/** The API id inside a Message-ID `<id@host>`. */
const uuidOf = (messageId: string) => messageId.slice(1, messageId.indexOf('@'));
const DUE_ID = uuidOf(fixture.due.message_id_header);
const SCHEDULED_ID = uuidOf(fixture.scheduled.message_id_header);

describe('a data directory written by release 1', function () {
  this.timeout(30_000);
  let dir: string;
  let dns: TestDnsServer;
  let sink: SmtpSink;
  let clock: ManualClock;
  let server: TestServer | null = null;

  before(async () => {
    dns = await startDnsServer();
    sink = await startSink();
  });

  after(async () => {
    await dns?.close();
    await sink?.close();
  });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-release-1-'));
    // data/ and keys/ as startServer lays them out: <dir>/data, <dir>/keys.
    execFileSync('tar', ['xzf', join(FIXTURES, 'data-dir-release-1.tar.gz'), '-C', dir]);
    clock = new ManualClock(Date.parse(fixture.clock));
  });

  afterEach(async () => {
    await server?.stop();
    server = null;
    rmSync(dir, { recursive: true, force: true });
  });

  /** The configuration both starts share; only delivery differs. */
  function config(delivery: ConfigInput['delivery']): ConfigInput {
    return {
      server: { hostname: 'mx.postilion.test', sending_ips: ['192.0.2.10'] },
      dns: { servers: [dns.address], timeout_ms: 500, tries: 1 },
      api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } },
      delivery,
    };
  }

  async function start(delivery: ConfigInput['delivery'], logLines: string[]): Promise<TestServer> {
    server = await startServer({ dir, clock, logLines, config: config(delivery) });
    return server;
  }

  /** The fixture's account and its administrator key, written by release 1. */
  const asAdmin = (s: TestServer) => ({ url: s.url, adminKey: fixture.admin_key });
  const messagePath = (id: string) => `/v2/accounts/${fixture.account_id}/messages/${encodeURIComponent(id)}`;

  async function read(s: TestServer, id: string) {
    const res = await call(asAdmin(s), 'GET', messagePath(id));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body;
  }

  async function until(s: TestServer, id: string, status: string) {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const message = await read(s, id);
      if (message.status === status) return message;
      if (Date.now() > deadline) throw new Error(`message ${id} is ${message.status}, not ${status}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  async function dueEntries(s: TestServer): Promise<DueEntry[]> {
    const out: DueEntry[] = [];
    for await (const entry of s.daemon.core.jobIndex.entries('message')) out.push(entry);
    return out;
  }

  /** Every key of the index but the fences closing each kind's range (written at each start). */
  async function scheduleKeys(s: TestServer): Promise<string[]> {
    const fences = new Set(JOB_KINDS.map(fenceKey));
    const keys = await s.daemon.core.store.families.schedule.keys().all();
    expect(keys.filter((k) => fences.has(k))).to.have.length(JOB_KINDS.length);
    return keys.filter((k) => !fences.has(k));
  }

  /** `postilion queue status --json` over the running daemon's control socket. */
  async function queueStatus() {
    const configPath = join(dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\nlog:\n  level: silent\n`);
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, 'queue', 'status', '--json'], { out: (t) => (out += t), err: (t) => (err += t) });
    expect(code, err).to.equal(0);
    return JSON.parse(out);
  }

  const migratedLines = (lines: string[]) => lines.map((l) => JSON.parse(l) as { msg: string; step?: string }).filter((l) => l.msg === 'store migrated');

  it('opens and is migrated to schema 2 once: its queue is served, counted and delivered', async () => {
    // First start, delivery off: the migration, and what the API and the queue view show.
    const firstLog: string[] = [];
    let s = await start({ enabled: false }, firstLog);
    // Release 1 → 2 moves the due-time entries; a later schema adds its own steps after it.
    expect(migratedLines(firstLog).map((l) => l.step)[0]).to.equal('schema 1 → 2: 2 due-time entries now name their job kind');
    expect(await s.daemon.core.meta.schemaVersion())
      .to.equal(SCHEMA_VERSION)
      .and.to.be.at.least(2);
    expect((await dueEntries(s)).map(({ id, dueMs }) => [id, new Date(dueMs).toISOString()])).to.deep.equal([
      [DUE_ID, new Date(fixture.clock).toISOString()],
      [SCHEDULED_ID, fixture.scheduled.first_attempt],
    ]);
    // No key of release 1's form is left behind.
    const keys = await scheduleKeys(s);
    expect(keys).to.have.length(2);
    for (const key of keys) expect(key).to.match(/^message:\d{15}:[0-9a-f-]{36}$/);

    // The administrator key of release 1 still authenticates; both messages read back queued.
    const due = await read(s, fixture.due.message_id_header);
    expect(due).to.include({ id: DUE_ID, recipient: fixture.due.recipient, status: 'Received', num_attempts: 0, account_id: fixture.account_id });
    const scheduled = await read(s, SCHEDULED_ID);
    expect(scheduled).to.include({ recipient: fixture.scheduled.recipient, status: 'Received', num_attempts: 0 });

    const status = await queueStatus();
    expect(status.totals).to.deep.equal({ queued: 2, due: 1, deferred: 0, scheduled: 1, held: 0 });
    expect(status.destinations.map((d: { destination: string; queued: number }) => [d.destination, d.queued])).to.deep.equal([['example.org', 2]]);
    expect(status.destinations[0].next_attempt_at).to.equal(new Date(fixture.clock).toISOString());
    await s.stop();
    server = null;

    // Second start, delivering to a sink for example.org: no migration step, the due message
    // goes at once (DKIM-signed with the key release 1 made), the scheduled one at its time.
    const secondLog: string[] = [];
    s = await start({ enabled: true, transport: { 'example.org': { host: '127.0.0.1', port: sink.port, tls: 'off' } } }, secondLog);
    expect(migratedLines(secondLog)).to.deep.equal([]);
    expect(s.daemon.core.migrations).to.deep.equal([]);
    expect(await s.daemon.core.meta.schemaVersion()).to.equal(SCHEMA_VERSION);

    const [sent] = await sink.waitFor(1);
    expect(sent!.to).to.deep.equal([fixture.due.recipient]);
    expect(sent!.raw).to.match(/^DKIM-Signature: .*\bd=example\.com;/m);
    expect(sent!.raw).to.contain(`Message-ID: ${fixture.due.message_id_header}`);
    const delivered = await until(s, DUE_ID, 'Delivered');
    expect(delivered.num_attempts).to.equal(1);
    expect((await read(s, SCHEDULED_ID)).status).to.equal('Received');
    expect((await dueEntries(s)).map((e) => e.id)).to.deep.equal([SCHEDULED_ID]);

    clock.ms = Date.parse(fixture.scheduled.first_attempt);
    await s.daemon.parts.jobs.engine.wake();
    await sink.waitFor(2);
    expect(sink.received.map((r) => r.to[0])).to.deep.equal([fixture.due.recipient, fixture.scheduled.recipient]);
    await until(s, SCHEDULED_ID, 'Delivered');
    expect(await dueEntries(s)).to.deep.equal([]);
    expect((await queueStatus()).totals).to.deep.equal({ queued: 0, due: 0, deferred: 0, scheduled: 0, held: 0 });
    await s.stop();
    server = null;

    // Migrating a current store again is a no-op, step and writes alike.
    const store = await Store.open(join(dir, 'data'));
    try {
      const before = (await store.families.schedule.keys().all()).length + (await store.families.meta.keys().all()).join();
      expect(await migrate(store, { buildCounters: async () => 0 })).to.deep.equal([]);
      expect((await store.families.schedule.keys().all()).length + (await store.families.meta.keys().all()).join()).to.equal(before);
    } finally {
      await store.close();
    }
  });

  it('a data directory whose meta names a newer schema (a later release) is refused, naming it, and left as it was', async () => {
    const newer = SCHEMA_VERSION + 1;
    const empty = mkdtempSync(join(tmpdir(), 'postilion-schema-3-'));
    try {
      const data = join(empty, 'data');
      const store = await Store.open(data);
      await store.commit([{ type: 'put', family: 'meta', key: 'schema', value: newer }]);
      await store.close();

      let refused: Error | null = null;
      try {
        server = await startServer({ dir: empty, clock, config: config({ enabled: false }) });
      } catch (err) {
        refused = err as Error;
      }
      expect(refused?.message).to.contain(`written by a newer release (store schema ${newer}; this release knows ${SCHEMA_VERSION})`);
      expect(refused?.message).to.contain(data);

      const direct = await openCore(validateConfig({ data: { dir: data }, keys: { dir: join(empty, 'keys') } }, 'test')).then(
        () => null,
        (err: Error) => err,
      );
      expect(direct?.message).to.contain('newer release');

      // Refused before anything was written, and the store was closed (not left locked).
      const after = await Store.open(data);
      try {
        expect(await after.get('meta', 'schema')).to.equal(newer);
        expect(await after.families.accounts.keys().all()).to.deep.equal([]);
        expect(await after.families.schedule.keys().all()).to.deep.equal([]);
      } finally {
        await after.close();
      }
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
