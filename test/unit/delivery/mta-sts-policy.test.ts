import { expect } from 'chai';
import { mxMatches, parsePolicy, stsRecordId } from '../../../src/delivery/tls-policy/mta-sts-policy.ts';

describe('MTA-STS policy (RFC 8461)', () => {
  it('reads the id of the one v=STSv1 TXT record; none, or several, is no policy', () => {
    expect(stsRecordId(['v=STSv1; id=20261127T010101;'])).to.equal('20261127T010101');
    expect(stsRecordId(['v=spf1 -all', 'v=STSv1;id=abc'])).to.equal('abc');
    expect(stsRecordId([])).to.equal(null);
    expect(stsRecordId(['v=STSv1; id=a', 'v=STSv1; id=b'])).to.equal(null);
    expect(stsRecordId(['v=STSv1; id=not-alnum'])).to.equal(null);
    expect(stsRecordId(['v=STSv10; id=a'])).to.equal(null);
  });

  it('parses a policy file with CRLF or LF lines, capping max_age at a year', () => {
    const p = parsePolicy('version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.Example.net\r\nmax_age: 9999999999\r\n');
    expect(p).to.deep.equal({
      mode: 'enforce',
      mx: ['mail.example.com', '*.example.net'],
      maxAge: 31_557_600,
      lines: ['version: STSv1', 'mode: enforce', 'mx: mail.example.com', 'mx: *.Example.net', 'max_age: 9999999999'],
    });
    expect(parsePolicy('version: STSv1\nmode: none\nmax_age: 60\n').mode).to.equal('none');
  });

  it('refuses a policy without version, with an unknown mode, without max_age or without mx', () => {
    expect(() => parsePolicy('mode: enforce\nmx: a.example\nmax_age: 1')).to.throw(/version/);
    expect(() => parsePolicy('version: STSv1\nmode: strict\nmx: a.example\nmax_age: 1')).to.throw(/mode/);
    expect(() => parsePolicy('version: STSv1\nmode: enforce\nmx: a.example')).to.throw(/max_age/);
    expect(() => parsePolicy('version: STSv1\nmode: enforce\nmax_age: 10')).to.throw(/no mx/);
    expect(() => parsePolicy('<html>not a policy</html>')).to.throw(/key: value/);
  });

  it('matches MX hosts exactly or by one leftmost label of a wildcard', () => {
    const patterns = ['mail.example.com', '*.example.net'];
    expect(mxMatches(patterns, 'MAIL.example.com.')).to.equal(true);
    expect(mxMatches(patterns, 'mx1.example.net')).to.equal(true);
    expect(mxMatches(patterns, 'example.net')).to.equal(false);
    expect(mxMatches(patterns, 'a.b.example.net')).to.equal(false);
    expect(mxMatches(patterns, 'evil-example.net')).to.equal(false);
    expect(mxMatches(patterns, 'mail.example.com.evil.org')).to.equal(false);
  });
});
