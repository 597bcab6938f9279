import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SCHEMA_VERSION } from '../../../src/store/meta.ts';
import { call, ManualClock, startServer, type TestServer } from '../../helpers/harness.ts';

/**
 * Upgrading in place from release 2 (commit 047b792, store schema 2), which kept no statistics
 * counters: six messages sent over three days through a sink MX (delivered after 1–4 s of the
 * manual clock, one bounced, one deferred once then delivered the next day), their outcomes in
 * the JSON next to the tarball. On first start the counters are built from the stored messages
 * and the statistics API answers what hand-counting the fixture gives.
 */

const FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), '../../fixtures');
const fixture = JSON.parse(readFileSync(join(FIXTURES, 'data-dir-release-2.json'), 'utf8')) as { account_id: string; admin_key: string };

const WINDOW = 'from_time=2026-11-18T00:00:00Z&to_time=2026-11-21T00:00:00Z';
const day = (d: string) => ({ from_timestamp: `2026-11-${d}T00:00:00Z`, to_timestamp: `2026-11-${Number(d) + 1}T00:00:00Z` });
const counts = (c: Partial<Record<'r' | 'd' | 'df' | 'b', number>>) => ({
  reception_count: c.r ?? 0,
  delivered_count: c.d ?? 0,
  deferred_count: c.df ?? 0,
  bounced_count: c.b ?? 0,
  failed_count: 0,
  suppressed_count: 0,
  opened_count: 0,
  clicked_count: 0,
});

describe('a data directory written by release 2', function () {
  this.timeout(30_000);
  let dir: string;
  let server: TestServer | null = null;
  const logLines: string[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-release-2-'));
    execFileSync('tar', ['xzf', join(FIXTURES, 'data-dir-release-2.tar.gz'), '-C', dir]);
    server = await startServer({
      dir,
      logLines,
      clock: new ManualClock(Date.parse('2026-11-21T12:00:00Z')),
      config: {
        server: { hostname: 'mx.postilion.test', sending_ips: ['192.0.2.10'] },
        api: { rate_limits: { statistics: { per_second: 1000, burst: 1000 } } },
      },
    });
  });

  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const stats = (endpoint: string, query: string) =>
    call({ url: server!.url, adminKey: fixture.admin_key }, 'GET', `/v2/accounts/${fixture.account_id}/statistics/transactional/${endpoint}?${query}`);

  it('builds its counters once, from the stored messages, on first start', async () => {
    const steps = logLines
      .map((l) => JSON.parse(l) as { msg: string; step?: string })
      .filter((l) => l.msg === 'store migrated')
      .map((l) => l.step);
    expect(steps).to.deep.equal([
      'schema 2 → 3: statistics counters built from 6 stored messages',
      'schema 3 → 4: new webhook and route deliveries are kept in their due-time entries',
    ]);
    expect(await server!.daemon.core.meta.schemaVersion()).to.equal(SCHEMA_VERSION);
  });

  it('deliverability by day and by hour counts what release 2 did', async () => {
    const res = await stats('deliverability', `${WINDOW}&group_by=day`);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.data).to.deep.equal([
      { ...day('18'), ...counts({ r: 3, d: 2, b: 1 }) },
      { ...day('19'), ...counts({ r: 2, d: 1, df: 1 }) },
      { ...day('20'), ...counts({ r: 1, d: 2 }) },
    ]);
    const hours = await stats('deliverability', 'from_time=2026-11-18T09:00:00Z&to_time=2026-11-18T18:00:00Z&group_by=hour&recipient_domains=example.net');
    expect(hours.body.data.filter((b: { reception_count: number }) => b.reception_count > 0)).to.deep.equal([
      { from_timestamp: '2026-11-18T17:00:00Z', to_timestamp: '2026-11-18T18:00:00Z', ...counts({ r: 1, b: 1 }) },
    ]);
    const tagged = await stats('deliverability', `${WINDOW}&group_by=month&tags=promo`);
    expect(tagged.body.data).to.deep.equal([{ from_timestamp: '2026-11-18T00:00:00Z', to_timestamp: '2026-11-21T00:00:00Z', ...counts({ r: 2, d: 1, b: 1 }) }]);
  });

  it('bounces by classification and delivery times from acceptance', async () => {
    const bounces = await stats('bounce', `${WINDOW}&group_by=week`);
    expect(bounces.body.data).to.deep.equal([
      { from_timestamp: '2026-11-18T00:00:00Z', to_timestamp: '2026-11-21T00:00:00Z', bounces: [{ classification: 'InvalidRecipient', count: 1 }] },
    ]);
    const times = await stats('delivery-time', `${WINDOW}&group_by=day&sender_domain=example.com`);
    expect(times.body.data).to.deep.equal([
      { ...day('18'), avg_delivery_time: 3, delivered_count: 2, delivery_times: [{ recipient_domain: 'example.org', delivery_time: 3, count: 2 }] },
      { ...day('19'), avg_delivery_time: 1, delivered_count: 1, delivery_times: [{ recipient_domain: 'example.net', delivery_time: 1, count: 1 }] },
      // The deferred message: accepted 11-19 23:50:00, delivered 11-20 12:30:03 (45,603 s); the other 6 s.
      { ...day('20'), avg_delivery_time: 22804.5, delivered_count: 2, delivery_times: [{ recipient_domain: 'example.org', delivery_time: 22804.5, count: 2 }] },
    ]);
  });

  it('a restart builds nothing again and counts the same', async () => {
    const before = (await stats('deliverability', `${WINDOW}&group_by=day`)).body;
    logLines.length = 0;
    server = await server!.restart();
    expect(logLines.filter((l) => l.includes('store migrated'))).to.deep.equal([]);
    expect((await stats('deliverability', `${WINDOW}&group_by=day`)).body).to.deep.equal(before);
  });
});
