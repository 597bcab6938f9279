import { Resolver } from 'node:dns/promises';
import { expect } from 'chai';
import { publishRecords, startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';

/** The test DNS server itself, asked the way the daemon asks: Node's resolver, UDP then TCP. */
describe('test DNS server', () => {
  let dns: TestDnsServer;
  let resolver: Resolver;
  beforeEach(async () => {
    dns = await startDnsServer();
    resolver = new Resolver({ timeout: 500, tries: 1 });
    resolver.setServers([dns.address]);
  });
  afterEach(async () => {
    await dns.close();
  });

  const code = async (lookup: Promise<unknown>) => {
    try {
      await lookup;
      return 'answered';
    } catch (err) {
      return (err as NodeJS.ErrnoException).code;
    }
  };

  it('serves TXT, CNAME and MX records from the zone, names in any case', async () => {
    dns.zone.set('example.com', 'TXT', ['v=spf1 -all', 'other']);
    dns.zone.set('rp.example.com', 'CNAME', ['mx.postilion.test']);
    dns.zone.set('example.com', 'MX', [{ exchange: 'mx.postilion.test', priority: 10 }]);
    expect(await resolver.resolveTxt('EXAMPLE.com')).to.deep.equal([['v=spf1 -all'], ['other']]);
    expect(await resolver.resolveCname('rp.example.com')).to.deep.equal(['mx.postilion.test']);
    expect(await resolver.resolveMx('example.com')).to.deep.equal([{ exchange: 'mx.postilion.test', priority: 10 }]);
  });

  it('splits a long TXT record into 255-byte strings, and an answer too big for UDP goes over TCP', async () => {
    const long = `v=DKIM1; k=rsa; p=${'A'.repeat(700)}`;
    dns.zone.set('big.example.com', 'TXT', [long, long.replace('k=rsa', 'k=ed25519')]);
    const [first] = await resolver.resolveTxt('big.example.com');
    expect(first!.map((chunk) => chunk.length)).to.deep.equal([255, 255, long.length - 510]);
    expect(first!.join('')).to.equal(long);
    // Truncated over UDP, asked again over TCP on the same port.
    expect(dns.queries).to.deep.equal(['TXT big.example.com', 'TXT big.example.com']);
  });

  it('answers NXDOMAIN for an unknown name and NODATA for a missing type, and follows zone changes', async () => {
    dns.zone.set('example.com', 'TXT', ['x']);
    expect(await code(resolver.resolveTxt('unknown.example.com'))).to.equal('ENOTFOUND');
    expect(await code(resolver.resolveMx('example.com'))).to.equal('ENODATA');
    dns.zone.delete('example.com', 'TXT');
    expect(await code(resolver.resolveTxt('example.com'))).to.equal('ENOTFOUND');
    dns.zone.set('example.com', 'TXT', ['y']);
    expect(await resolver.resolveTxt('example.com')).to.deep.equal([['y']]);
    dns.zone.clear();
    expect(await code(resolver.resolveTxt('example.com'))).to.equal('ENOTFOUND');
  });

  it('answers SERVFAIL while failing, for every name or for some', async () => {
    dns.zone.set('example.com', 'TXT', ['x']);
    dns.zone.set('other.com', 'TXT', ['x']);
    dns.failing = true;
    expect(await code(resolver.resolveTxt('example.com'))).to.equal('ESERVFAIL');
    dns.failing = false;
    dns.failingNames.add('other.com');
    expect(await code(resolver.resolveTxt('other.com'))).to.equal('ESERVFAIL');
    expect(await code(resolver.resolveTxt('example.com'))).to.equal('answered');
  });

  it('publishes the records of an API domain as given', async () => {
    publishRecords(dns.zone, [
      { type: 'TXT', host: 'example.com', content: 'v=spf1 ip4:192.0.2.10 ~all' },
      { type: 'TXT', host: 'sel._domainkey.example.com', content: 'v=DKIM1; k=rsa; p=AAAA' },
      { type: 'CNAME', host: 'rp.example.com', content: 'mx.postilion.test' },
      { type: 'MX', host: 'example.com', content: 'mx.postilion.test' },
    ]);
    expect(await resolver.resolveTxt('example.com')).to.deep.equal([['v=spf1 ip4:192.0.2.10 ~all']]);
    expect(await resolver.resolveTxt('sel._domainkey.example.com')).to.deep.equal([['v=DKIM1; k=rsa; p=AAAA']]);
    expect(await resolver.resolveCname('rp.example.com')).to.deep.equal(['mx.postilion.test']);
    expect(await resolver.resolveMx('example.com')).to.deep.equal([{ exchange: 'mx.postilion.test', priority: 10 }]);
  });
});
