import { expect } from 'chai';
import { dkimMatches, dmarcPresent, parseTags, spfAuthorizes } from '../../../src/domains/checks.ts';
import type { Identity } from '../../../src/domains/records.ts';

const withIps: Identity = { hostname: 'mx.postilion.test', sendingIps: ['192.0.2.10', '2001:db8::10'], dmarcRecord: 'v=DMARC1; p=none' };
const noIps: Identity = { ...withIps, sendingIps: [] };

describe('spfAuthorizes', () => {
  it('accepts ip4/ip6 mechanisms that cover every sending address', () => {
    expect(spfAuthorizes(['v=spf1 ip4:192.0.2.0/24 ip6:2001:db8::/32 -all'], withIps)).to.equal(true);
    expect(spfAuthorizes(['v=spf1 ip4:192.0.2.10 ip6:2001:db8::10 ~all'], withIps)).to.equal(true);
  });

  it('refuses when one sending address is not covered', () => {
    expect(spfAuthorizes(['v=spf1 ip4:192.0.2.10 ~all'], withIps)).to.equal(false);
  });

  it('accepts a:<hostname>, in any case, with or without sending addresses', () => {
    expect(spfAuthorizes(['v=spf1 a:MX.Postilion.Test ~all'], withIps)).to.equal(true);
    expect(spfAuthorizes(['v=spf1 a:mx.postilion.test -all'], noIps)).to.equal(true);
  });

  it('does not count mechanisms with a fail, softfail or neutral qualifier', () => {
    expect(spfAuthorizes(['v=spf1 -a:mx.postilion.test ~all'], noIps)).to.equal(false);
    expect(spfAuthorizes(['v=spf1 ~ip4:192.0.2.10 ?ip6:2001:db8::10 -all'], withIps)).to.equal(false);
    expect(spfAuthorizes(['v=spf1 +ip4:192.0.2.10 +ip6:2001:db8::10 -all'], withIps)).to.equal(true);
  });

  it('evaluates left to right: an earlier -all ends the record', () => {
    expect(spfAuthorizes(['v=spf1 -all ip4:192.0.2.10 ip6:2001:db8::10'], withIps)).to.equal(false);
    expect(spfAuthorizes(['v=spf1 -ip4:192.0.2.10 ip4:192.0.2.0/24 ip6:2001:db8::/32 ~all'], withIps)).to.equal(false);
    expect(spfAuthorizes(['v=spf1 ip4:192.0.2.10 ip6:2001:db8::10 redirect=_spf.example.com'], withIps)).to.equal(true);
  });

  it('does not follow include:', () => {
    expect(spfAuthorizes(['v=spf1 include:_spf.mx.postilion.test ~all'], noIps)).to.equal(false);
  });

  it('refuses no SPF record, and two SPF records (a permanent error)', () => {
    expect(spfAuthorizes(['google-site-verification=abc'], noIps)).to.equal(false);
    expect(spfAuthorizes(['v=spf1 a:mx.postilion.test ~all', 'v=spf1 -all'], noIps)).to.equal(false);
  });

  it('ignores other TXT records next to the SPF record', () => {
    expect(spfAuthorizes(['v=spf1x nonsense', 'verification=1', 'v=spf1 a:mx.postilion.test ~all'], noIps)).to.equal(true);
  });

  it('refuses a record that authorises nothing for us', () => {
    expect(spfAuthorizes(['v=spf1 -all'], withIps)).to.equal(false);
    expect(spfAuthorizes(['v=spf1 ip4:not-an-ip ~all'], withIps)).to.equal(false);
  });
});

describe('dkimMatches', () => {
  const key = { selector: 's', algorithm: 'rsa' as const, publicKey: 'MIIBabc+/=', createdAt: '' };

  it('matches the published key, ignoring spaces inside p=', () => {
    expect(dkimMatches(['v=DKIM1; k=rsa; p=MIIB abc+/='], key)).to.equal(true);
    expect(dkimMatches(['p=MIIBabc+/='], key)).to.equal(true);
  });

  it('refuses another key, another algorithm, a revoked key or another version', () => {
    expect(dkimMatches(['v=DKIM1; k=rsa; p=MIIBother'], key)).to.equal(false);
    expect(dkimMatches(['v=DKIM1; k=ed25519; p=MIIBabc+/='], key)).to.equal(false);
    expect(dkimMatches(['v=DKIM1; k=rsa; p='], key)).to.equal(false);
    expect(dkimMatches(['v=DKIM2; p=MIIBabc+/='], key)).to.equal(false);
  });

  it('refuses records receivers would refuse: v= not first, or h= without sha256', () => {
    expect(dkimMatches(['k=rsa; v=DKIM1; p=MIIBabc+/='], key)).to.equal(false);
    expect(dkimMatches(['v=DKIM1; h=sha1; p=MIIBabc+/='], key)).to.equal(false);
    expect(dkimMatches(['v=DKIM1; h=sha1:sha256; p=MIIBabc+/='], key)).to.equal(true);
  });

  it('needs k=ed25519 for an Ed25519 key', () => {
    const ed = { ...key, algorithm: 'ed25519' as const };
    expect(dkimMatches(['v=DKIM1; p=MIIBabc+/='], ed)).to.equal(false);
    expect(dkimMatches(['v=DKIM1; k=ed25519; p=MIIBabc+/='], ed)).to.equal(true);
  });
});

describe('dmarcPresent', () => {
  it('wants exactly one v=DMARC1 record', () => {
    expect(dmarcPresent(['v=DMARC1; p=none'])).to.equal(true);
    expect(dmarcPresent(['v=DMARC1'])).to.equal(true);
    expect(dmarcPresent([])).to.equal(false);
    expect(dmarcPresent(['v=DMARC1; p=none', 'v=DMARC1; p=reject'])).to.equal(false);
    expect(dmarcPresent(['v=DMARC2; p=none', 'p=none'])).to.equal(false);
  });
});

describe('parseTags', () => {
  it('splits tag=value pairs and trims them', () => {
    expect(parseTags(' v=DKIM1 ; k = rsa;p=abc=; ')).to.deep.equal({ v: 'DKIM1', k: 'rsa', p: 'abc=' });
  });
});
