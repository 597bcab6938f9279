import { expect } from 'chai';
import { validateConfig } from '../../../src/config/load.ts';
import { mxMatches } from '../../../src/doctor/mta-sts.ts';
import { policyId, policyRecord, policyText, publishedPolicies, requestedPolicy } from '../../../src/domains/mta-sts-policy.ts';

describe('published MTA-STS policies (RFC 8461)', () => {
  const config = validateConfig(
    { mta_sts_policy: { domains: { 'Example.COM': { mode: 'enforce', mx: ['mx1.example.com', '*.mx.example.net'], max_age_seconds: 86400 } } } },
    'test',
  );

  it('writes the policy file: version first, CRLF lines, the domain lower-cased under mta-sts.', () => {
    expect(publishedPolicies(config)).to.deep.equal({
      'mta-sts.example.com': 'version: STSv1\r\nmode: enforce\r\nmx: mx1.example.com\r\nmx: *.mx.example.net\r\nmax_age: 86400\r\n',
    });
  });

  it('announces it with an id of letters and digits that changes with the policy', () => {
    const text = policyText({ mode: 'testing', mx: ['mx.example.com'], max_age_seconds: 604800 });
    expect(policyId(text)).to.match(/^[a-f0-9]{20}$/);
    expect(policyId(text)).to.not.equal(policyId(text.replace('testing', 'enforce')));
    expect(policyRecord(text)).to.equal(`v=STSv1; id=${policyId(text)}`);
  });

  it('answers GET and HEAD of /.well-known/mta-sts.txt for a policy host, with any port or case; nothing else', () => {
    const policies = publishedPolicies(config);
    const text = policies['mta-sts.example.com'];
    expect(requestedPolicy(policies, 'GET', '/.well-known/mta-sts.txt', 'MTA-STS.example.com:443')).to.equal(text);
    expect(requestedPolicy(policies, 'HEAD', '/.well-known/mta-sts.txt?x=1', 'mta-sts.example.com.')).to.equal(text);
    expect(requestedPolicy(policies, 'POST', '/.well-known/mta-sts.txt', 'mta-sts.example.com')).to.equal(null);
    expect(requestedPolicy(policies, 'GET', '/.well-known/other', 'mta-sts.example.com')).to.equal(null);
    expect(requestedPolicy(policies, 'GET', '/.well-known/mta-sts.txt', 'mta-sts.example.org')).to.equal(null);
    expect(requestedPolicy(policies, 'GET', '/.well-known/mta-sts.txt', undefined)).to.equal(null);
    expect(requestedPolicy(policies, 'GET', '/.well-known/mta-sts.txt', 'constructor')).to.equal(null);
  });

  it('refuses a policy without mx, a bad mx pattern, a max_age past a year, a key that is no domain', () => {
    const bad = [
      { 'example.com': { mode: 'enforce', mx: [] } },
      { 'example.com': { mode: 'enforce', mx: ['mx.*.example.com'] } },
      { 'example.com': { mode: 'enforce', mx: ['mx.example.com'], max_age_seconds: 31_557_601 } },
      { 'not a domain': { mode: 'enforce', mx: ['mx.example.com'] } },
    ];
    for (const domains of bad) expect(() => validateConfig({ mta_sts_policy: { domains } }, 'test'), JSON.stringify(domains)).to.throw();
  });

  it('matches MX hosts as §4.1 says: a name exactly, a wildcard one label deep', () => {
    expect(mxMatches('mx1.example.com', 'MX1.example.com.')).to.equal(true);
    expect(mxMatches('*.mx.example.net', 'a.mx.example.net')).to.equal(true);
    expect(mxMatches('*.mx.example.net', 'a.b.mx.example.net')).to.equal(false);
    expect(mxMatches('*.mx.example.net', 'mx.example.net')).to.equal(false);
  });
});
