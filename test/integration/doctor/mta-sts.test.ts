import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig } from '../../../src/config/load.ts';
import type { Check } from '../../../src/doctor/check.ts';
import { createLookups } from '../../../src/doctor/lookups.ts';
import { checkMtaStsPolicies } from '../../../src/doctor/mta-sts.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { startTestCa } from '../../helpers/tls.ts';

const POLICY = { mode: 'enforce' as const, mx: ['mx1.example.com'], max_age_seconds: 86400 };

describe('doctor: the published MTA-STS policy, its TXT records and MX hosts', function () {
  this.timeout(30_000);
  let dir: string;
  let dns: TestDnsServer;
  let server: TestServer;
  let tlsPort: number;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-doctor-mta-sts-'));
    const ca = await startTestCa();
    const leaf = await ca.issue(['mta-sts.example.com']);
    mkdirSync(join(dir, 'keys', 'tls'), { recursive: true });
    writeFileSync(join(dir, 'keys', 'tls', 'api.crt'), leaf.cert);
    writeFileSync(join(dir, 'keys', 'tls', 'api.key'), leaf.key);
    writeFileSync(join(dir, 'ca.pem'), ca.cert);
    dns = await startDnsServer();
    // The daemon publishes the policy on its HTTPS API listener, with a certificate of the test CA.
    server = await startServer({ dir, config: { api: { tls: { enabled: true, port: 0 } }, mta_sts_policy: { domains: { 'example.com': POLICY } } } });
    tlsPort = Number(new URL(server.daemon.parts.api.urls[1]!).port);
  });
  after(async () => {
    await server?.stop();
    await dns?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    dns.zone.clear();
    dns.zone.set('mta-sts.example.com', 'A', ['127.0.0.1']);
    dns.zone.set('_mta-sts.example.com', 'TXT', ['v=STSv1; id=20261121a']);
    dns.zone.set('example.com', 'MX', [{ exchange: 'mx1.example.com', priority: 10 }]);
    dns.zone.set('_smtp._tls.example.com', 'TXT', ['v=TLSRPTv1; rua=mailto:tls-reports@example.com']);
  });

  const doctor = (policy: Record<string, unknown> = POLICY, options: { ca?: boolean } = {}): Promise<Check[]> => {
    const config = validateConfig(
      {
        dns: { servers: [dns.address], timeout_ms: 500, tries: 1 },
        mta_sts_policy: { domains: { 'example.com': policy }, check_port: tlsPort, check_ca_file: options.ca === false ? '' : join(dir, 'ca.pem') },
      },
      'test',
    );
    return checkMtaStsPolicies(config, createLookups(config));
  };
  const statuses = (checks: Check[]) => Object.fromEntries(checks.map((c) => [c.check, c.status]));

  it('is OK when the TXT records are published, the policy is served as configured and covers every MX', async () => {
    const checks = await doctor();
    expect(statuses(checks), JSON.stringify(checks)).to.deep.equal({
      'mta-sts example.com txt': 'OK',
      'mta-sts example.com policy': 'OK',
      'mta-sts example.com mx': 'OK',
      'mta-sts example.com tlsrpt': 'OK',
    });
    expect(checks[3]!.reason).to.contain('reports to mailto:tls-reports@example.com');
  });

  it('fails a served policy other than the configured one, and an MX an enforced policy does not cover', async () => {
    const checks = await doctor({ mode: 'enforce', mx: ['mx2.example.com'], max_age_seconds: 86400 });
    expect(statuses(checks)).to.deep.include({ 'mta-sts example.com policy': 'FAIL', 'mta-sts example.com mx': 'FAIL' });
    expect(checks.find((c) => c.check === 'mta-sts example.com mx')!.reason).to.match(/MX mx1\.example\.com of example\.com not matched/);
  });

  it('fails a policy whose certificate does not verify, once the TXT record announces it', async () => {
    const checks = await doctor(POLICY, { ca: false });
    const policy = checks.find((c) => c.check === 'mta-sts example.com policy')!;
    expect(policy.status).to.equal('FAIL');
    expect(policy.reason).to.match(/could not be fetched: .*certificate/i);
  });

  it('warns without the TXT records, naming the record to publish', async () => {
    dns.zone.delete('_mta-sts.example.com');
    dns.zone.delete('_smtp._tls.example.com');
    const checks = await doctor();
    expect(statuses(checks)).to.deep.include({ 'mta-sts example.com txt': 'WARN', 'mta-sts example.com tlsrpt': 'WARN', 'mta-sts example.com policy': 'OK' });
    expect(checks[0]!.reason).to.match(/publish "v=STSv1; id=[a-f0-9]{20}"/);
  });
});
