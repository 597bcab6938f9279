import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { activeDkimOf, recordOf, standbyDkimOf, startDomainBed, type ApiDomain, type DomainBed, activeSelector } from '../../helpers/domains.ts';

describe('updating a domain', () => {
  let bed: DomainBed;
  beforeEach(async () => {
    bed = await startDomainBed();
  });
  afterEach(async () => {
    await bed.stop();
  });

  const update = (body: Record<string, unknown>) => bed.api('PUT', `${bed.base}/example.com`, { body });
  const keyFile = (d: ApiDomain, selector: string) => join(bed.server.dir, 'keys', 'dkim', d.id, `${selector}.pem`);
  const hosts = (d: ApiDomain) => d.dns_records.map((r) => r.host);

  it('changes the four subdomains and the DSN recipient before DNS is verified', async () => {
    const created = await bed.create('example.com');
    bed.clock.advance(1000);
    const res = await update({
      tracking_subdomain: 'clicks',
      return_path_subdomain: 'bounces',
      subscription_subdomain: 'prefs',
      media_subdomain: 'img',
      dsn_recipient: 'dsn@example.com',
    });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({
      tracking_subdomain: 'clicks',
      return_path_subdomain: 'bounces',
      subscription_subdomain: 'prefs',
      media_subdomain: 'img',
      dsn_recipient: 'dsn@example.com',
      created_at: created.created_at,
      updated_at: new Date(bed.clock.now()).toISOString(),
    });
    expect(hosts(res.body)).to.include.members(['clicks.example.com', 'bounces.example.com']);
    expect(hosts(res.body)).to.not.include.members(['track.example.com', 'rp.example.com']);
    expect(await bed.get('example.com')).to.deep.equal(res.body);

    const cleared = await update({ dsn_recipient: null });
    expect(cleared.body.dsn_recipient).to.equal(null);
  });

  for (const [field, record, value] of [
    ['tracking_subdomain', 'track.example.com', 'clicks'],
    ['return_path_subdomain', 'rp.example.com', 'bounces'],
  ] as const) {
    it(`locks ${field} with 400 once its CNAME has propagated`, async () => {
      const created = await bed.create('example.com');
      bed.dns.zone.set(record, 'CNAME', [recordOf(created, (r) => r.host === record).content]);
      const checked = (await bed.recheck('example.com')).body;
      expect(recordOf(checked, (r) => r.host === record).propagated).to.equal(true);
      expect(checked.dns_valid).to.equal(false); // the lock does not wait for the whole domain

      const res = await update({ [field]: value });
      expect(res.status).to.equal(400);
      expect(res.body.message).to.contain(field);
      expect((await bed.get('example.com'))[field]).to.not.equal(value);
      // Giving the same value, or changing an unlocked subdomain, is fine.
      expect((await update({ [field]: created[field] })).status).to.equal(200);
      expect((await update({ subscription_subdomain: 'prefs', media_subdomain: 'img' })).status).to.equal(200);
    });
  }

  it('refuses a dsn_recipient that is not an address, and clears it with null', async () => {
    await bed.create('example.com');
    for (const bad of ['not an email', 'no-at-sign', '@example.com', `${'a'.repeat(250)}@example.com`]) {
      const res = await update({ dsn_recipient: bad });
      expect(res.status, bad).to.equal(400);
      expect(res.body.message).to.contain('dsn_recipient');
    }
    expect((await update({ dsn_recipient: 'dsn@example.com' })).body.dsn_recipient).to.equal('dsn@example.com');
    expect((await update({ dsn_recipient: null })).body.dsn_recipient).to.equal(null);
  });

  it('renames the DKIM key with dkim_selector before DNS is valid, moving its key file', async () => {
    const created = await bed.create('example.com');
    const old = activeSelector(created);
    const pem = readFileSync(keyFile(created, old), 'utf8');
    expect(created.dkim_selector).to.equal(null);
    const res = await update({ dkim_selector: 'Brand2026' });
    expect(res.status).to.equal(200);
    expect(res.body.dkim_selector).to.equal('brand2026');
    expect(activeSelector(res.body)).to.equal('brand2026');
    expect(activeDkimOf(res.body).content).to.equal(activeDkimOf(created).content);
    expect(hosts(res.body)).to.not.include(`${old}._domainkey.example.com`);
    expect(readFileSync(keyFile(created, 'brand2026'), 'utf8')).to.equal(pem);
    expect(existsSync(keyFile(created, old))).to.equal(false);

    // null leaves the selector as it is.
    const unchanged = await update({ dkim_selector: null });
    expect(unchanged.status).to.equal(200);
    expect(unchanged.body.dkim_selector).to.equal('brand2026');
    expect(activeSelector(unchanged.body)).to.equal('brand2026');

    // "" (or blanks) clears the override: back to a generated selector, once.
    const generated = await update({ dkim_selector: '  ' });
    expect(generated.status).to.equal(200);
    expect(generated.body.dkim_selector).to.equal(null);
    expect(activeSelector(generated.body)).to.match(/^pst20261121[a-z0-9]{4}$/);
    expect(existsSync(keyFile(created, 'brand2026'))).to.equal(false);
    const again = await update({ dkim_selector: '' });
    expect(activeSelector(again.body)).to.equal(activeSelector(generated.body));
  });

  it('forgets whether the old selector propagated when the selector changes', async () => {
    const created = await bed.create('example.com');
    bed.dns.zone.add(activeDkimOf(created).host, 'TXT', activeDkimOf(created).content);
    expect(activeDkimOf((await bed.recheck('example.com')).body).propagated).to.equal(true);
    const res = await update({ dkim_selector: 'fresh' });
    expect(activeDkimOf(res.body).propagated).to.equal(false);
  });

  it('locks dkim_selector with 400 once the domain has been DNS-valid, even after DNS breaks', async () => {
    const created = await bed.create('example.com');
    bed.publish(created);
    expect((await bed.recheck('example.com')).body.dns_valid).to.equal(true);
    const res = await update({ dkim_selector: 'other' });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.contain('dkim_selector');

    bed.dns.zone.clear();
    expect((await bed.recheck('example.com')).body.dns_valid).to.equal(false);
    expect((await update({ dkim_selector: 'other' })).status).to.equal(400);
    expect(activeSelector(await bed.get('example.com'))).to.equal(activeSelector(created));
    // Asking for what is already set is not a change, locked or not.
    expect((await update({ dkim_selector: '' })).status).to.equal(200);
    expect((await update({ dkim_selector: null })).status).to.equal(200);
  });

  it("refuses with 400 a selector that is the standby key's, leaving both keys in place", async () => {
    const created = await bed.create('example.com', { dkim_rotation_interval_days: 7 });
    const standby = standbyDkimOf(created).host.split('.')[0]!;
    const pems = [activeSelector(created), standby].map((s) => readFileSync(keyFile(created, s), 'utf8'));
    const res = await update({ dkim_selector: standby });
    expect(res.status).to.equal(400);
    expect([activeSelector(created), standby].map((s) => readFileSync(keyFile(created, s), 'utf8'))).to.deep.equal(pems);
    expect(await bed.get('example.com')).to.deep.equal(created);
  });

  it('drops the standby key with dkim_rotation_interval_days null, and makes one when an interval is set', async () => {
    const created = await bed.create('example.com', { dkim_rotation_interval_days: 7 });
    const standby = standbyDkimOf(created).host.split('.')[0]!;
    expect(existsSync(keyFile(created, standby))).to.equal(true);

    const off = await update({ dkim_rotation_interval_days: null });
    expect(off.status).to.equal(200);
    expect(off.body.dkim_rotation_interval_days).to.equal(null);
    expect(off.body.dns_records.filter((r: { label: string }) => /standby/.test(r.label))).to.deep.equal([]);
    expect(existsSync(keyFile(created, standby))).to.equal(false);
    expect(existsSync(keyFile(created, activeSelector(created)))).to.equal(true);

    const on = await update({ dkim_rotation_interval_days: 14 });
    expect(on.status).to.equal(200);
    expect(on.body.dkim_rotation_interval_days).to.equal(14);
    const fresh = standbyDkimOf(on.body).host.split('.')[0]!;
    expect(fresh).to.not.equal(activeSelector(created));
    expect(existsSync(keyFile(created, fresh))).to.equal(true);

    // Another interval keeps the standby key.
    const longer = await update({ dkim_rotation_interval_days: 30 });
    expect(standbyDkimOf(longer.body).content).to.equal(standbyDkimOf(on.body).content);
  });

  it('changes nothing but updated_at on an empty update', async () => {
    const created = await bed.create('example.com');
    const res = await update({});
    expect(res.status).to.equal(200);
    expect({ ...res.body, updated_at: created.updated_at }).to.deep.equal(created);
  });
});
