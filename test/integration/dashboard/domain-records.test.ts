import { expect } from 'chai';
import { dashboardRoutes } from '../../../src/dashboard/activity.ts';
import { activeDkimOf, dmarcOf, otherAccount, spfOf, startDomainBed, type DomainBed } from '../../helpers/domains.ts';
import { ask, mountRoutes } from './route-mount.ts';

interface RecordView {
  key: string;
  type: string;
  host: string;
  value: string;
  required: boolean;
  status: string;
  found: string[] | null;
}

/**
 * The dashboard's view of a domain's records as DNS holds them now, over a daemon whose resolver
 * asks a DNS server on loopback: propagated, missing or wrong per record with what was found;
 * unknown when DNS does not answer; never another account's domain.
 */
describe('dashboard route: a domain’s records as DNS holds them', function () {
  this.timeout(60_000);
  let bed: DomainBed;
  let mount: { url: string; close: () => Promise<void> };
  const path = (account = bed.server.accountId) => `/ui/api/dashboard/accounts/${account}/domains`;
  const get = (name: string, key = bed.server.adminKey) => ask(mount.url, key, 'GET', `${path()}/${name}/records`);
  const byKey = (records: RecordView[]) => Object.fromEntries(records.map((r) => [r.key, r]));

  beforeEach(async () => {
    bed = await startDomainBed();
    const core = bed.server.daemon.core;
    const routes = dashboardRoutes({
      messages: core.messages,
      events: core.eventsRepo,
      domains: core.domains,
      dnsChecker: core.dnsChecker,
      webhooks: core.webhooks,
      routes: core.routes,
      attempts: null,
      sendTestEvent: () => Promise.reject(new Error('not in these tests')),
    });
    mount = await mountRoutes(core, routes);
  });
  afterEach(async () => {
    await mount?.close();
    await bed?.stop();
  });

  it('says per record propagated, missing or wrong, with what was found; it stores nothing', async () => {
    const domain = await bed.create('example.com');
    bed.publish(domain);
    // SPF published wrong, DMARC not at all.
    bed.dns.zone.set('example.com', 'TXT', ['verification=1', 'v=spf1 ip4:198.51.100.7 -all']);
    bed.dns.zone.delete('_dmarc.example.com');
    const res = await get('example.com');
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.domain).to.equal('example.com');
    expect(new Date(res.body.checked_at).toISOString()).to.equal(res.body.checked_at);
    const records = byKey(res.body.records as RecordView[]);
    expect(Object.keys(records)).to.have.length(domain.dns_records.length);
    const spf = spfOf(domain);
    expect(records.spf).to.deep.equal({
      key: 'spf',
      type: 'TXT',
      host: 'example.com',
      value: spf.content,
      required: true,
      status: 'wrong',
      found: ['v=spf1 ip4:198.51.100.7 -all'],
    });
    expect(records.dmarc).to.include({ host: dmarcOf(domain).host, status: 'missing', required: true });
    expect(records.dmarc!.found).to.deep.equal([]);
    const dkim = activeDkimOf(domain);
    const dkimView = Object.values(records).find((r) => r.host === dkim.host)!;
    expect(dkimView).to.include({ type: 'TXT', value: dkim.content, status: 'propagated', required: true });
    expect(dkimView.found).to.deep.equal([dkim.content]);
    expect(records.return_path).to.include({ type: 'CNAME', status: 'propagated' });
    expect(records.return_path!.found).to.deep.equal(['mx.postilion.test']);
    // A look, not a check: the domain's stored state is as it was.
    expect((await bed.get('example.com')).last_dns_check_at).to.equal(null);
  });

  it('says unknown, with nothing found, when DNS does not answer', async () => {
    await bed.create('example.com');
    bed.dns.failing = true;
    const res = await get('example.com');
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    for (const r of res.body.records as RecordView[]) expect(r, r.key).to.include({ status: 'unknown', found: null });
  });

  it('answers only for a domain of the key’s account, to a key that may read domains', async () => {
    await bed.create('example.com');
    const other = await otherAccount(bed);
    expect((await ask(mount.url, other.key, 'GET', `${path(other.accountId)}/example.com/records`)).status).to.equal(404);
    expect((await get('example.com', other.key)).status).to.equal(401);
    expect((await get('unknown.example')).status).to.equal(404);
    const tooLong = await get(`${'a'.repeat(300)}.com`);
    expect(tooLong.status).to.equal(400);
    expect(tooLong.body.message).to.be.a('string');
    const keyWith = async (scopes: string[]) => {
      const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/api-keys`, { body: { label: `k-${scopes.join(' ')}`.slice(0, 60), scopes } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      return res.body.secret_key as string;
    };
    expect((await get('example.com', await keyWith(['api-keys:read']))).status).to.equal(403);
    expect((await get('example.com', await keyWith(['domains:read']))).status).to.equal(200);
  });
});
