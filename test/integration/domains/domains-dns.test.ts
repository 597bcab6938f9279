import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { expect } from 'chai';
import { activeDkimOf, dmarcOf, eventually, spfOf, startDomainBed, HOSTNAME, PAST_CACHE_MS, type ApiDomain, type DomainBed } from '../../helpers/domains.ts';

const iso = (ms: number) => new Date(ms).toISOString();

describe('domain DNS checks', () => {
  let bed: DomainBed;
  let created: ApiDomain;
  const check = () => bed.api('POST', `${bed.base}/example.com/check-dns`);

  beforeEach(async () => {
    bed = await startDomainBed();
    created = await bed.create('example.com');
  });
  afterEach(async () => {
    await bed.stop();
  });

  /** Publishes what the API asks for and checks it: a domain with valid DNS. */
  async function publishAndVerify(): Promise<ApiDomain> {
    bed.publish(created);
    const res = await bed.recheck('example.com');
    expect(res.status).to.equal(200);
    expect(res.body.dns_valid).to.equal(true);
    return res.body;
  }

  it('verifies a domain once every record the API asks for is published', async () => {
    expect((await check()).body.dns_valid).to.equal(false);
    bed.publish(created);
    bed.clock.advance(PAST_CACHE_MS);
    const res = await check();
    expect(res.status).to.equal(200);
    expect(res.body.dns_valid).to.equal(true);
    expect(res.body.last_dns_check_at).to.equal(iso(bed.clock.now()));
    for (const record of res.body.dns_records) expect(record.propagated, record.label).to.equal(true);
    expect(await bed.get('example.com')).to.deep.equal(res.body);
    expect(await bed.dnsErrors()).to.deep.equal([]);
  });

  it('reports what is missing: nothing published → not valid, no record propagated, no event', async () => {
    const res = await check();
    expect(res.status).to.equal(200);
    expect(res.body.dns_valid).to.equal(false);
    expect(res.body.last_dns_check_at).to.equal(iso(bed.clock.now()));
    for (const record of res.body.dns_records) expect(record.propagated, record.label).to.equal(false);
    expect(await bed.dnsErrors()).to.deep.equal([]);
  });

  it('is valid with only the required records published', async () => {
    for (const record of created.dns_records.filter((r) => r.required)) bed.dns.zone.add(record.host, 'TXT', record.content);
    const res = await bed.recheck('example.com');
    expect(res.body.dns_valid).to.equal(true);
    for (const record of res.body.dns_records) expect(record.propagated, record.label).to.equal(record.required);
  });

  it('returns the cached result within 60 s even though DNS changed, and looks again after', async () => {
    const valid = await publishAndVerify();
    bed.dns.zone.delete('example.com', 'TXT');
    bed.dns.queries = [];
    bed.clock.advance(59_000);
    const cached = await check();
    expect(cached.body).to.deep.equal(valid);
    expect(bed.dns.queries).to.deep.equal([]);

    bed.clock.advance(2_000);
    const fresh = await check();
    expect(fresh.body.dns_valid).to.equal(false);
    expect(fresh.body.last_dns_check_at).to.equal(iso(bed.clock.now()));
    expect(bed.dns.queries).to.include('TXT example.com');
  });

  describe('a required record that breaks', () => {
    const otherKey = () => {
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
      return (createPublicKey(privateKey).export({ type: 'spki', format: 'der' }) as Buffer).toString('base64');
    };
    const breaks: Array<{
      what: string;
      record: (d: ApiDomain) => ApiDomain['dns_records'][number];
      spf: boolean;
      dkim: boolean;
      dmarc: boolean;
      apply: (bed: DomainBed, d: ApiDomain) => void;
    }> = [
      { what: 'the SPF record removed', record: spfOf, spf: false, dkim: true, dmarc: true, apply: (b) => b.dns.zone.delete('example.com', 'TXT') },
      {
        what: 'an SPF record without our sending IP',
        record: spfOf,
        spf: false,
        dkim: true,
        dmarc: true,
        apply: (b) => b.dns.zone.set('example.com', 'TXT', ['v=spf1 ip4:198.51.100.7 include:_spf.elsewhere.test ~all']),
      },
      {
        what: 'a second SPF record next to ours',
        record: spfOf,
        spf: false,
        dkim: true,
        dmarc: true,
        apply: (b) => b.dns.zone.add('example.com', 'TXT', 'v=spf1 a mx ~all'),
      },
      {
        what: 'the DKIM record publishing another key',
        record: activeDkimOf,
        spf: true,
        dkim: false,
        dmarc: true,
        apply: (b, d) => b.dns.zone.set(activeDkimOf(d).host, 'TXT', [`v=DKIM1; k=rsa; p=${otherKey()}`]),
      },
      { what: 'the DKIM record removed', record: activeDkimOf, spf: true, dkim: false, dmarc: true, apply: (b, d) => b.dns.zone.delete(activeDkimOf(d).host) },
      { what: 'the DMARC record removed', record: dmarcOf, spf: true, dkim: true, dmarc: false, apply: (b) => b.dns.zone.delete('_dmarc.example.com') },
      {
        what: 'the DMARC record replaced by something else',
        record: dmarcOf,
        spf: true,
        dkim: true,
        dmarc: false,
        apply: (b) => b.dns.zone.set('_dmarc.example.com', 'TXT', ['v=spf1 -all']),
      },
    ];

    for (const b of breaks) {
      it(`marks the domain invalid with ${b.what}, and records one domain.dns_error event`, async () => {
        await publishAndVerify();
        b.apply(bed, created);
        const res = await bed.recheck('example.com');
        expect(res.status).to.equal(200);
        expect(res.body.dns_valid).to.equal(false);
        const checkedAt = iso(bed.clock.now());
        expect(res.body.last_dns_check_at).to.equal(checkedAt);
        const broken = b.record(res.body);
        expect(broken.propagated).to.equal(false);
        // Only that record broke.
        for (const record of res.body.dns_records.filter((r: { host: string; type: string }) => r !== broken)) {
          expect(record.propagated, record.label).to.equal(true);
        }

        const events = await bed.dnsErrors();
        expect(events).to.have.length(1);
        expect(events[0]).to.include({ type: 'domain.dns_error', accountId: bed.server.accountId, createdAt: checkedAt });
        expect(events[0]!.data).to.deep.equal({
          domain: 'example.com',
          account_id: bed.server.accountId,
          spf_valid: b.spf,
          dkim_valid: b.dkim,
          dmarc_valid: b.dmarc,
          dns_last_checked_at: checkedAt,
        });

        // Still broken at the next check: no second event.
        expect((await bed.recheck('example.com')).body.dns_valid).to.equal(false);
        expect(await bed.dnsErrors()).to.have.length(1);

        // Repaired, then broken again: a new event.
        bed.publish(created);
        for (const host of ['example.com', '_dmarc.example.com', activeDkimOf(created).host]) {
          bed.dns.zone.set(
            host,
            'TXT',
            created.dns_records.filter((r) => r.host === host && r.type === 'TXT').map((r) => r.content),
          );
        }
        expect((await bed.recheck('example.com')).body.dns_valid).to.equal(true);
        b.apply(bed, created);
        expect((await bed.recheck('example.com')).body.dns_valid).to.equal(false);
        expect(await bed.dnsErrors()).to.have.length(2);
      });
    }
  });

  it('records no event when an optional record breaks, and stays valid', async () => {
    await publishAndVerify();
    bed.dns.zone.delete('track.example.com');
    bed.dns.zone.delete('example.com', 'MX');
    const res = await bed.recheck('example.com');
    expect(res.body.dns_valid).to.equal(true);
    const byHost = (host: string, type: string) => res.body.dns_records.find((r: { host: string; type: string }) => r.host === host && r.type === type);
    expect(byHost('track.example.com', 'CNAME').propagated).to.equal(false);
    expect(byHost('example.com', 'MX').propagated).to.equal(false);
    expect(byHost('rp.example.com', 'CNAME').propagated).to.equal(true);
    expect(await bed.dnsErrors()).to.deep.equal([]);
  });

  it('has the periodic job re-check every domain, record the event once, and count the validity change', async () => {
    await publishAndVerify();
    const other = await bed.create('other.com');
    bed.dns.zone.delete('_dmarc.example.com');
    bed.clock.advance(30 * 60_000);
    const errors: unknown[] = [];
    const changed = await bed.server.daemon.core.dnsChecker.checkAll((_d, err) => errors.push(err));
    expect(errors).to.deep.equal([]);
    expect(changed).to.equal(1);
    const domain = await bed.get('example.com');
    expect(domain.dns_valid).to.equal(false);
    expect(domain.last_dns_check_at).to.equal(iso(bed.clock.now()));
    expect(dmarcOf(domain).propagated).to.equal(false);
    expect((await bed.get('other.com')).last_dns_check_at).to.equal(iso(bed.clock.now()));
    const events = await bed.dnsErrors();
    expect(events).to.have.length(1);
    expect(events[0]!.data).to.include({ domain: 'example.com', dmarc_valid: false, spf_valid: true, dkim_valid: true });

    bed.clock.advance(30 * 60_000);
    expect(await bed.server.daemon.core.dnsChecker.checkAll((_d, err) => errors.push(err))).to.equal(0);
    expect(await bed.dnsErrors()).to.have.length(1);

    bed.publish(other);
    bed.dns.zone.set('_dmarc.example.com', 'TXT', [dmarcOf(created).content]);
    bed.clock.advance(30 * 60_000);
    expect(await bed.server.daemon.core.dnsChecker.checkAll((_d, err) => errors.push(err))).to.equal(2);
    expect(errors).to.deep.equal([]);
  });

  it('answers 503 with a message while DNS fails, keeping the last result', async () => {
    const valid = await publishAndVerify();
    bed.dns.failing = true;
    const res = await bed.recheck('example.com');
    expect(res.status).to.equal(503);
    expect(res.body).to.have.keys('message');
    expect(res.body.message).to.be.a('string').and.not.empty;
    expect(await bed.get('example.com')).to.deep.equal(valid);
    expect(await bed.dnsErrors()).to.deep.equal([]);

    // The periodic job keeps the state too.
    await bed.server.daemon.core.dnsChecker.checkAll(() => undefined);
    expect(await bed.get('example.com')).to.deep.equal(valid);
    expect(await bed.dnsErrors()).to.deep.equal([]);

    bed.dns.failing = false;
    expect((await bed.recheck('example.com')).status).to.equal(200);
  });

  it('keeps the last known state of a record whose lookup alone fails', async () => {
    await publishAndVerify();
    bed.dns.zone.delete('_dmarc.example.com');
    bed.dns.failingNames.add('_dmarc.example.com');
    bed.dns.zone.delete('example.com', 'TXT');
    const res = await bed.recheck('example.com');
    expect(res.status).to.equal(200);
    expect(dmarcOf(res.body).propagated).to.equal(true);
    expect(spfOf(res.body).propagated).to.equal(false);
    expect(res.body.dns_valid).to.equal(false);
  });

  it('answers 503 to a first check while DNS fails, leaving last_dns_check_at null', async () => {
    bed.dns.failing = true;
    const res = await check();
    expect(res.status).to.equal(503);
    expect((await bed.get('example.com')).last_dns_check_at).to.equal(null);
  });

  describe('SPF', () => {
    const spfWith = async (...records: string[]) => {
      bed.publish(created);
      bed.dns.zone.set('example.com', 'TXT', records);
      const res = await bed.recheck('example.com');
      expect(res.status).to.equal(200);
      return spfOf(res.body).propagated;
    };

    it(`accepts an SPF record authorising a:${HOSTNAME}`, async () => {
      expect(await spfWith(`v=spf1 a:${HOSTNAME} -all`)).to.equal(true);
    });

    it('accepts an SPF record whose ip4 range covers the sending IP, next to other TXT records', async () => {
      expect(await spfWith('google-site-verification=abc', 'v=spf1 include:_spf.elsewhere.test ip4:192.0.2.0/24 ~all')).to.equal(true);
    });

    it('does not accept include: alone, nor our IP qualified with - or ~', async () => {
      expect(await spfWith('v=spf1 include:_spf.postilion.test ~all')).to.equal(false);
      expect(await spfWith('v=spf1 -ip4:192.0.2.10 ~all')).to.equal(false);
      expect(await spfWith('v=spf1 ~ip4:192.0.2.10 -all')).to.equal(false);
    });

    it('accepts an SPF record split over several TXT strings', async () => {
      expect(await spfWith(`v=spf1 ${'ip4:198.51.100.1 '.repeat(20)}ip4:192.0.2.10 ~all`)).to.equal(true);
    });
  });
});

describe('the scheduled DNS re-check', () => {
  let bed: DomainBed;
  beforeEach(async () => {
    // Every second, so that the daemon's own node-cron job is seen running.
    bed = await startDomainBed({ domains: { check_schedule: '* * * * * *' } });
  });
  afterEach(async () => {
    await bed.stop();
  });

  it('is wired into the daemon: a published domain turns valid and a broken one records its event without any API call', async () => {
    const created = await bed.create('example.com');
    bed.publish(created);
    await eventually(async () => (await bed.get('example.com')).dns_valid);
    bed.dns.zone.delete('example.com', 'TXT');
    await eventually(async () => (await bed.dnsErrors()).length === 1);
    expect(spfOf(await bed.get('example.com')).propagated).to.equal(false);
  });
});
