import { expect } from 'chai';
import { expectedRecords, spfRecord, type Identity } from '../../../src/domains/records.ts';
import type { DomainRecord } from '../../../src/store/records.ts';

const identity: Identity = { hostname: 'mx.postilion.test', sendingIps: ['192.0.2.10', '2001:db8::10'], dmarcRecord: 'v=DMARC1; p=none;' };

describe('DNS records of a domain', () => {
  const key = (selector: string, algorithm: 'rsa' | 'ed25519' = 'rsa') => ({ selector, algorithm, publicKey: `P${selector}`, createdAt: '' });
  const domain = {
    name: 'example.com',
    trackingSubdomain: 'track',
    returnPathSubdomain: 'rp',
    dkim: {
      active: { keys: [key('a'), key('ae', 'ed25519')], activatedAt: null, publishUntil: null },
      standby: { keys: [key('b')], activatedAt: null, publishUntil: null },
      retired: [{ keys: [key('z')], activatedAt: null, publishUntil: '2026-02-01T00:00:00.000Z' }],
    },
  } as unknown as DomainRecord;

  it('authorises the sending addresses in SPF, or the host name when there are none', () => {
    expect(spfRecord(identity)).to.equal('v=spf1 ip4:192.0.2.10 ip6:2001:db8::10 ~all');
    expect(spfRecord({ ...identity, sendingIps: [] })).to.equal('v=spf1 a:mx.postilion.test ~all');
  });

  it('requires SPF, DMARC and the active DKIM keys, and only those', () => {
    const records = expectedRecords(domain, identity);
    expect(records.filter((r) => r.required).map((r) => r.key)).to.deep.equal(['spf', 'dkim:a', 'dkim:ae', 'dmarc']);
  });

  it('publishes standby and retired keys as optional, at their selectors', () => {
    const records = expectedRecords(domain, identity);
    const standby = records.find((r) => r.key === 'dkim:b')!;
    expect(standby).to.include({ type: 'TXT', host: 'b._domainkey.example.com', content: 'v=DKIM1; k=rsa; p=Pb', required: false });
    const retired = records.find((r) => r.key === 'dkim:z')!;
    expect(retired.required).to.equal(false);
    expect(retired.label).to.contain('2026-02-01');
    expect(records.find((r) => r.key === 'dkim:ae')!.content).to.equal('v=DKIM1; k=ed25519; p=Pae');
  });

  it('points return path and tracking CNAMEs and the inbound MX at the server', () => {
    const records = expectedRecords(domain, identity);
    expect(records.find((r) => r.key === 'return_path')).to.include({ type: 'CNAME', host: 'rp.example.com', content: 'mx.postilion.test' });
    expect(records.find((r) => r.key === 'tracking')).to.include({ type: 'CNAME', host: 'track.example.com', content: 'mx.postilion.test' });
    expect(records.find((r) => r.key === 'mx')).to.include({ type: 'MX', host: 'example.com', content: 'mx.postilion.test', required: false });
    expect(records.find((r) => r.key === 'dmarc')).to.include({ host: '_dmarc.example.com', content: 'v=DMARC1; p=none;' });
  });
});
