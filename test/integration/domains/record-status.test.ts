import { expect } from 'chai';
import { inspectRecords, MAX_FOUND, MAX_FOUND_CHARS, type RecordInspection } from '../../../src/domains/checks.ts';
import { expectedRecords, type ExpectedRecord, type Identity } from '../../../src/domains/records.ts';
import { createResolver, type DnsResolver } from '../../../src/domains/resolver.ts';
import type { DkimKeyRecord, DomainRecord } from '../../../src/store/records.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';

const identity: Identity = { hostname: 'mx.postilion.test', sendingIps: ['192.0.2.10'], dmarcRecord: 'v=DMARC1; p=none' };
const key: DkimKeyRecord = {
  selector: 'pst1',
  algorithm: 'rsa',
  publicKey: 'MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA',
  createdAt: '2026-01-01T00:00:00.000Z',
};

/** A domain's records as the daemon derives them: SPF, the active DKIM key, DMARC, return path, tracking, MX. */
function recordsOf(): ExpectedRecord[] {
  const domain = {
    name: 'example.com',
    returnPathSubdomain: 'rp',
    trackingSubdomain: 'track',
    dkim: { active: { keys: [key], activatedAt: null, publishUntil: null }, standby: null, retired: [] },
  } as unknown as DomainRecord;
  return expectedRecords(domain, identity);
}

/** Each record's status and what was found, asked of a real DNS server on loopback through the daemon's resolver. */
describe('inspectRecords: propagated, missing or wrong per record', () => {
  let dns: TestDnsServer;
  let resolver: DnsResolver;
  const records = recordsOf();
  const inspect = async (): Promise<Record<string, RecordInspection>> => Object.fromEntries(await inspectRecords(resolver, records, identity));

  beforeEach(async () => {
    dns = await startDnsServer();
    resolver = createResolver({ servers: [dns.address], timeoutMs: 500, tries: 1 });
  });
  afterEach(async () => {
    await dns.close();
  });

  it('says missing when nothing that concerns a record is at its name', async () => {
    // Other TXT strings at the apex and at _dmarc are not SPF or DMARC records.
    dns.zone.set('example.com', 'TXT', ['google-site-verification=abc']);
    dns.zone.set('_dmarc.example.com', 'TXT', ['not dmarc']);
    const found = await inspect();
    for (const k of ['spf', 'dkim:pst1', 'return_path', 'tracking', 'mx']) expect(found[k], k).to.deep.equal({ status: 'missing', found: [] });
    expect(found.dmarc).to.deep.equal({ status: 'missing', found: [] });
  });

  it('says propagated when each record is published as asked', async () => {
    const content = (k: string) => records.find((r) => r.key === k)!.content;
    dns.zone.set('example.com', 'TXT', ['verification=1', content('spf')]);
    dns.zone.set('pst1._domainkey.example.com', 'TXT', [content('dkim:pst1')]);
    dns.zone.set('_dmarc.example.com', 'TXT', ['v=DMARC1; p=reject; rua=mailto:d@example.com']);
    dns.zone.set('rp.example.com', 'CNAME', ['mx.postilion.test']);
    dns.zone.set('example.com', 'MX', [{ exchange: 'mx.postilion.test', priority: 10 }]);
    const found = await inspect();
    expect(found.spf).to.deep.equal({ status: 'propagated', found: [content('spf')] });
    expect(found['dkim:pst1']).to.deep.equal({ status: 'propagated', found: [content('dkim:pst1')] });
    expect(found.dmarc).to.deep.equal({ status: 'propagated', found: ['v=DMARC1; p=reject; rua=mailto:d@example.com'] });
    expect(found.return_path).to.deep.equal({ status: 'propagated', found: ['mx.postilion.test'] });
    expect(found.mx).to.deep.equal({ status: 'propagated', found: ['mx.postilion.test'] });
    expect(found.tracking).to.deep.equal({ status: 'missing', found: [] });
  });

  it('says wrong, with what was found, when something else is published at the name', async () => {
    dns.zone.set('example.com', 'TXT', ['verification=1', 'v=spf1 ip4:198.51.100.1 -all']);
    dns.zone.set('pst1._domainkey.example.com', 'TXT', ['v=DKIM1; k=rsa; p=SOMEOTHERKEY']);
    // Two DMARC records are a permanent error: wrong, both shown.
    dns.zone.set('_dmarc.example.com', 'TXT', ['v=DMARC1; p=none', 'v=DMARC1; p=reject']);
    dns.zone.set('rp.example.com', 'CNAME', ['bounces.elsewhere.test']);
    dns.zone.set('example.com', 'MX', [{ exchange: 'mx.elsewhere.test', priority: 5 }]);
    const found = await inspect();
    expect(found.spf).to.deep.equal({ status: 'wrong', found: ['v=spf1 ip4:198.51.100.1 -all'] });
    expect(found['dkim:pst1']).to.deep.equal({ status: 'wrong', found: ['v=DKIM1; k=rsa; p=SOMEOTHERKEY'] });
    expect(found.dmarc).to.deep.equal({ status: 'wrong', found: ['v=DMARC1; p=none', 'v=DMARC1; p=reject'] });
    expect(found.return_path).to.deep.equal({ status: 'wrong', found: ['bounces.elsewhere.test'] });
    expect(found.mx).to.deep.equal({ status: 'wrong', found: ['mx.elsewhere.test'] });
  });

  it('tells at most ten values, each cut at 512 characters', async () => {
    const long = `v=DKIM1; k=rsa; p=${'B'.repeat(2000)}`;
    dns.zone.set(
      'pst1._domainkey.example.com',
      'TXT',
      Array.from({ length: 14 }, (_, i) => `${long}${i}`),
    );
    const found = (await inspect())['dkim:pst1']!;
    expect(found.status).to.equal('wrong');
    if (found.status === 'unknown') return;
    expect(found.found).to.have.length(MAX_FOUND);
    expect(found.found.every((v) => v.length === MAX_FOUND_CHARS)).to.equal(true);
  });

  it('says unknown, with nothing found, for a lookup that fails; the others are still judged', async () => {
    dns.zone.set('_dmarc.example.com', 'TXT', ['v=DMARC1; p=none']);
    dns.failingNames.add('pst1._domainkey.example.com');
    const found = await inspect();
    expect(found['dkim:pst1']).to.deep.equal({ status: 'unknown' });
    expect(found.dmarc!.status).to.equal('propagated');
    dns.failing = true;
    expect(Object.values(await inspect()).every((r) => r.status === 'unknown')).to.equal(true);
  });
});
