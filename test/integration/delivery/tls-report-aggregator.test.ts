import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TlsReports } from '../../../src/delivery/tls-reports/tls-reports.ts';
import type { TlsSessionResult } from '../../../src/delivery/tls-outcome.ts';
import { createResolver } from '../../../src/domains/resolver.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import type { Acceptor } from '../../../src/message/accept.ts';
import { TlsReportMailer } from '../../../src/queue/tls-report-mailer.ts';
import { AccountsRepo } from '../../../src/store/accounts-repo.ts';
import { DomainsRepo } from '../../../src/store/domains-repo.ts';
import { Store } from '../../../src/store/store.ts';
import { TlsReportsRepo } from '../../../src/store/tls-reports-repo.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { ManualClock } from '../../helpers/harness.ts';

const DAY = 86_400_000;
const session = (domain: string): TlsSessionResult => ({
  policyDomain: domain,
  policyType: 'no-policy-found',
  policyStrings: [],
  receivingMxHostname: `mx.${domain}`,
  receivingIp: '192.0.2.1',
  sendingMtaIp: null,
  success: true,
});

describe('TLS reports: the aggregator over a real store', function () {
  this.timeout(20_000);
  let dir: string;
  let store: Store;
  let dns: TestDnsServer;
  let clock: ManualClock;
  let repo: TlsReportsRepo;
  let reports: TlsReports;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-tlsrpt-agg-'));
    store = await Store.open(dir);
    dns = await startDnsServer();
    clock = new ManualClock();
    repo = new TlsReportsRepo(store);
    // The from address is at no domain of this (empty) store: every report by mail fails before the acceptor is reached.
    const mailer = new TlsReportMailer(new DomainsRepo(store), new AccountsRepo(store), undefined as unknown as Acceptor, clock, 'tls@nowhere.example');
    reports = new TlsReports(
      {
        repo,
        commit: (ops) => store.commit(ops),
        clock,
        resolver: createResolver({ servers: [dns.address], timeoutMs: 500, tries: 1 }),
        mailer,
        log: createLogger('silent'),
      },
      { organization: 'o', contact: 'c', maxDomainsPerDay: 3, timeoutMs: 1000, allowNetworks: [] },
    );
  });
  afterEach(async () => {
    await store.close();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const stored = async () => (await repo.before('9999', 1000)).map(([, r]) => `${r.policyDomain} ${r.success}`);

  it('counts at most max_domains_per_day policy domains a day, adding to what is stored at each flush', async () => {
    for (const domain of ['a.example', 'b.example', 'c.example', 'd.example', 'a.example']) reports.record(session(domain));
    await reports.flush();
    reports.record(session('a.example'));
    reports.record(session('e.example'));
    await reports.flush();
    expect(await stored()).to.deep.equal(['a.example 3', 'b.example 1', 'c.example 1']);
    // A new day counts anew.
    clock.advance(DAY);
    reports.record(session('e.example'));
    await reports.flush();
    expect(await stored()).to.include('e.example 1');
  });

  it('keeps the counts of a report no target took for the next run, and drops them after three days', async () => {
    dns.zone.set('_smtp._tls.a.example', 'TXT', ['v=TLSRPTv1; rua=mailto:tlsrpt@a.example']);
    reports.record(session('a.example'));
    reports.record(session('b.example'));
    clock.advance(DAY);
    expect(await reports.sendReports()).to.deep.equal({ domains: 2, sent: 0, unreported: 1, failed: 1 });
    expect(await stored()).to.deep.equal(['a.example 1']);
    clock.advance(DAY);
    expect(await reports.sendReports()).to.deep.include({ domains: 1, failed: 1 });
    expect(await stored()).to.deep.equal(['a.example 1']);
    clock.advance(3 * DAY);
    expect(await reports.sendReports()).to.deep.include({ domains: 1, failed: 1 });
    expect(await stored()).to.deep.equal([]);
  });
});
