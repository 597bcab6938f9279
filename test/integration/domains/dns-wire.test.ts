import { expect } from 'chai';
import { DnsWireClient } from '../../../src/domains/dns-wire.ts';
import { DnsUnavailableError } from '../../../src/domains/resolver.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';

/** The DNS wire client (TLSA, the AD bit) against a real DNS server on loopback. */
describe('DNS wire client', () => {
  let dns: TestDnsServer;
  let client: DnsWireClient;

  before(async () => {
    dns = await startDnsServer();
    client = new DnsWireClient({ servers: [dns.address], timeoutMs: 500, tries: 1 });
  });
  after(async () => {
    await dns?.close();
  });
  afterEach(() => {
    dns.zone.clear();
    dns.ad = false;
    dns.failing = false;
    dns.insecureNames.clear();
  });

  it('reads TLSA records and reports the AD bit of a validating resolver', async () => {
    const data = Buffer.alloc(32, 0xab);
    dns.zone.set('_25._tcp.mx.example.org', 'TLSA', [{ usage: 3, selector: 1, matching: 1, data }]);
    const insecure = await client.query('_25._tcp.mx.example.org', 'TLSA');
    expect(insecure.ad).to.equal(false);
    expect(insecure.records).to.have.length(1);
    dns.ad = true;
    const secure = await client.query('_25._tcp.mx.example.org', 'TLSA');
    expect(secure.ad).to.equal(true);
    expect(secure.records[0]!.data).to.deep.equal(Buffer.concat([Buffer.from([3, 1, 1]), data]));
    expect(secure.records[0]!.name).to.equal('_25._tcp.mx.example.org');
  });

  it('gives NXDOMAIN and NODATA as empty answers, and clears AD for an unsigned zone', async () => {
    dns.ad = true;
    dns.zone.set('example.org', 'MX', [{ exchange: 'mx.example.org', priority: 10 }]);
    expect((await client.query('nothing.example.org', 'TLSA')).records).to.deep.equal([]);
    const nodata = await client.query('example.org', 'TLSA');
    expect(nodata.records).to.deep.equal([]);
    expect(nodata.ad).to.equal(true);
    dns.insecureNames.add('example.org');
    const mx = await client.query('example.org', 'MX');
    expect(mx.records).to.have.length(1);
    expect(mx.ad).to.equal(false);
  });

  it('falls back to TCP when the UDP answer is truncated', async () => {
    dns.zone.set(
      '_25._tcp.big.example.org',
      'TLSA',
      Array.from({ length: 40 }, (_, i) => ({ usage: 3, selector: 0, matching: 2, data: Buffer.alloc(64, i) })),
    );
    dns.queries = [];
    const answer = await client.query('_25._tcp.big.example.org', 'TLSA');
    expect(answer.records).to.have.length(40);
    // Asked twice: over UDP (truncated), then over TCP.
    expect(dns.queries).to.deep.equal(['TLSA _25._tcp.big.example.org', 'TLSA _25._tcp.big.example.org']);
  });

  it('throws DnsUnavailableError on SERVFAIL', async () => {
    dns.failing = true;
    const err = await client.query('example.org', 'MX').then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(DnsUnavailableError);
    expect((err as DnsUnavailableError).code).to.equal('ESERVFAIL');
  });
});
