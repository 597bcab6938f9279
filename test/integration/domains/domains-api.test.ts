import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import {
  activeDkimOf,
  otherAccount,
  standbyDkimOf,
  startDomainBed,
  testMessage,
  verifyDkim,
  type ApiDomain,
  type DomainBed,
  activeSelector,
} from '../../helpers/domains.ts';
import { storeContains, type CallResult } from '../../helpers/harness.ts';

const keyDir = (bed: DomainBed, domainId: string) => join(bed.server.dir, 'keys', 'dkim', domainId);

describe('domains API', () => {
  let bed: DomainBed;
  beforeEach(async () => {
    bed = await startDomainBed();
  });
  afterEach(async () => {
    await bed.stop();
  });

  async function keyWith(scopes: string[]): Promise<string> {
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/api-keys`, { body: { label: scopes.join(' '), scopes } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.secret_key;
  }

  describe('create', () => {
    it('creates a domain with every Domain field, its name lower-cased, trimmed and without the trailing dot', async () => {
      const res = await bed.api('POST', bed.base, { body: { domain: '  Example.COM. ' } });
      expect(res.status).to.equal(201);
      const d = res.body;
      const now = new Date(bed.clock.now()).toISOString();
      expect(d).to.include({
        object: 'domain',
        domain: 'example.com',
        account_id: bed.server.accountId,
        created_at: now,
        updated_at: now,
        last_dns_check_at: null,
        dns_valid: false,
        tracking_subdomain: 'track',
        return_path_subdomain: 'rp',
        subscription_subdomain: 'unsub',
        media_subdomain: 'media',
        dkim_rotation_interval_days: null,
        rotation_ready: false,
        dsn_recipient: null,
      });
      expect(d.id).to.match(/^[0-9a-f-]{36}$/);
      // A generated selector: "pst", the date, a random suffix.
      expect(activeSelector(d)).to.match(/^pst20261121[a-z0-9]{4}$/);
      const rows = d.dns_records.map((r: ApiDomain['dns_records'][number]) => [r.type, r.host, r.required, r.propagated]);
      expect(rows).to.deep.equal([
        ['TXT', 'example.com', true, false],
        ['TXT', `${activeSelector(d)}._domainkey.example.com`, true, false],
        ['TXT', '_dmarc.example.com', true, false],
        ['CNAME', 'rp.example.com', false, false],
        ['CNAME', 'track.example.com', false, false],
        ['MX', 'example.com', false, false],
      ]);
      const content = (host: string, type: string) => d.dns_records.find((r: { host: string; type: string }) => r.host === host && r.type === type).content;
      expect(content('example.com', 'TXT')).to.equal('v=spf1 ip4:192.0.2.10 ~all');
      expect(content(`${activeSelector(d)}._domainkey.example.com`, 'TXT')).to.match(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]{300,}$/);
      expect(content('_dmarc.example.com', 'TXT')).to.match(/^v=DMARC1;/);
      expect(content('rp.example.com', 'CNAME')).to.equal('mx.postilion.test');
      expect(content('track.example.com', 'CNAME')).to.equal('mx.postilion.test');
      expect(content('example.com', 'MX')).to.equal('mx.postilion.test');
      for (const r of d.dns_records) expect(r.label).to.be.a('string').and.not.empty;

      const fetched = await bed.api('GET', `${bed.base}/example.com`);
      expect(fetched.body).to.deep.equal(d);
    });

    it('takes the subdomains, selector, rotation interval and DSN recipient it is given', async () => {
      const d = await bed.create('example.com', {
        tracking_subdomain: 'clicks',
        return_path_subdomain: 'bounces',
        subscription_subdomain: 'prefs',
        media_subdomain: 'img',
        dkim_selector: 'Mail2026',
        dkim_rotation_interval_days: 30,
        dsn_recipient: 'postmaster@example.com',
      });
      expect(d).to.include({
        tracking_subdomain: 'clicks',
        return_path_subdomain: 'bounces',
        subscription_subdomain: 'prefs',
        media_subdomain: 'img',
        dkim_selector: 'mail2026',
        dkim_rotation_interval_days: 30,
        dsn_recipient: 'postmaster@example.com',
      });
      const hosts = d.dns_records.map((r) => r.host);
      expect(hosts).to.include.members(['mail2026._domainkey.example.com', 'bounces.example.com', 'clicks.example.com']);
      // Rotation enabled: a standby key to publish ahead of the switch.
      const standby = d.dns_records.filter((r) => /standby/.test(r.label));
      expect(standby).to.have.length(1);
      expect(standby[0]!.required).to.equal(false);
    });

    it('answers 409 to a domain that already exists, in this account or in another', async () => {
      await bed.create('example.com');
      const again = await bed.api('POST', bed.base, { body: { domain: 'EXAMPLE.com.' } });
      expect(again.status).to.equal(409);
      expect(again.body).to.deep.equal({ message: 'domain already exists' });

      const other = await otherAccount(bed);
      const elsewhere = await bed.api('POST', other.base, { key: other.key, body: { domain: 'example.com' } });
      expect(elsewhere.status).to.equal(409);
      expect(elsewhere.body).to.deep.equal({ message: 'domain already exists' });
      expect((await bed.api('GET', other.base, { key: other.key })).body.data).to.deep.equal([]);
    });

    it('replays a create with the same Idempotency-Key instead of creating again', async () => {
      const headers = { 'idempotency-key': 'create-example-once' };
      const first = await bed.api('POST', bed.base, { body: { domain: 'example.com' }, headers });
      expect(first.status).to.equal(201);
      const again = await bed.api('POST', bed.base, { body: { domain: 'example.com' }, headers });
      expect(again.status).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      expect((await bed.api('GET', bed.base)).body.data).to.have.length(1);
    });

    it('publishes the public half of an imported RSA key and signs with it', async () => {
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      const pem = privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;
      const d = await bed.create('example.com', { dkim_private_key: pem });
      const p = (createPublicKey(privateKey).export({ type: 'spki', format: 'der' }) as Buffer).toString('base64');
      expect(activeDkimOf(d).content).to.equal(`v=DKIM1; k=rsa; p=${p}`);
      bed.publish(d);
      const message = testMessage();
      const signed = (await bed.server.daemon.core.signer.sign('example.com', message)) + message;
      expect((await verifyDkim(bed, signed))[0]!.result).to.equal('pass');
    });
  });

  describe('bad input', () => {
    const badNames = ['localhost', 'a..b', '-x.com', 'x'.repeat(300), '1.2.3.4', `${'a'.repeat(64)}.com`, 'exa mple.com', ''];
    for (const name of badNames) {
      it(`refuses the domain name "${name.length > 20 ? `${name.slice(0, 12)}…(${name.length})` : name}" with 400`, async () => {
        const res = await bed.api('POST', bed.base, { body: { domain: name } });
        expect(res.status).to.equal(400);
        expect(res.body.message).to.be.a('string').and.not.empty;
      });
    }

    const badSettings: Array<[string, Record<string, unknown>]> = [
      ['a 63-character selector', { dkim_selector: 's'.repeat(63) }],
      ['a selector with an underscore', { dkim_selector: 'bad_selector' }],
      ['a selector with a dot', { dkim_selector: 'two.labels' }],
      ['a selector starting with a hyphen', { dkim_selector: '-sel' }],
      ['a tracking subdomain of two labels', { tracking_subdomain: 'a.b' }],
      ['a return-path subdomain with an underscore', { return_path_subdomain: 'r_p' }],
      ['an empty media subdomain', { media_subdomain: '' }],
      ['a rotation interval of 0 days', { dkim_rotation_interval_days: 0 }],
      ['a rotation interval of 366 days', { dkim_rotation_interval_days: 366 }],
      ['a rotation interval of 1.5 days', { dkim_rotation_interval_days: 1.5 }],
      ['a dkim_private_key that is not PEM', { dkim_private_key: 'not a key' }],
      [
        'a dkim_private_key that is an EC key',
        { dkim_private_key: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) },
      ],
      [
        'a dkim_private_key of 512 bits',
        { dkim_private_key: generateKeyPairSync('rsa', { modulusLength: 512 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) },
      ],
      ['a dsn_recipient that is not an address', { dsn_recipient: 'nobody' }],
      ['a dsn_recipient that would break a header', { dsn_recipient: 'a>b,c@example.com' }],
      ['an unknown field', { dkim_key_size: 4096 }],
    ];
    for (const [what, body] of badSettings) {
      it(`refuses ${what} with 400 and creates nothing`, async () => {
        const res = await bed.api('POST', bed.base, { body: { domain: 'example.com', ...body } });
        expect(res.status, JSON.stringify(res.body)).to.equal(400);
        expect(res.body.message).to.be.a('string').and.not.empty;
        expect((await bed.api('GET', bed.base)).body.data).to.deep.equal([]);
        const dkimDir = join(bed.server.dir, 'keys', 'dkim');
        expect(existsSync(dkimDir) ? readdirSync(dkimDir) : []).to.deep.equal([]);
      });
    }

    it('refuses the same bad settings on update with 400, leaving the domain as it was', async () => {
      const before = await bed.create('example.com');
      for (const body of [{ dkim_selector: 's'.repeat(63) }, { tracking_subdomain: 'a.b' }, { dkim_rotation_interval_days: 0 }, { domain: 'other.com' }]) {
        const res = await bed.api('PUT', `${bed.base}/example.com`, { body });
        expect(res.status, JSON.stringify(body)).to.equal(400);
      }
      expect(await bed.get('example.com')).to.deep.equal(before);
    });
  });

  describe('addressing', () => {
    it('finds a domain by its name in any case and with a trailing dot', async () => {
      const d = await bed.create('example.com');
      expect((await bed.api('GET', `${bed.base}/EXAMPLE.com.`)).body.id).to.equal(d.id);
    });

    it('answers 400 for a malformed domain name in the path', async () => {
      for (const path of ['not_a_domain', 'localhost', '1.2.3.4', 'a..b']) {
        const res = await bed.api('GET', `${bed.base}/${path}`);
        expect(res.status, path).to.equal(400);
        expect(res.body.message).to.contain('invalid domain name');
      }
      expect((await bed.api('DELETE', `${bed.base}/bad_name`)).status).to.equal(400);
    });

    it('answers 404 for an unknown domain on get, update, delete and check-dns', async () => {
      await bed.create('example.com');
      const calls = [
        bed.api('GET', `${bed.base}/unknown.com`),
        bed.api('PUT', `${bed.base}/unknown.com`, { body: { media_subdomain: 'm' } }),
        bed.api('DELETE', `${bed.base}/unknown.com`),
        bed.api('POST', `${bed.base}/unknown.com/check-dns`),
      ];
      for (const res of await Promise.all(calls)) {
        expect(res.status).to.equal(404);
        expect(res.body.message).to.equal('domain not found');
      }
    });

    it("answers 404 for another account's domain on get, update, delete and check-dns, and leaves it alone", async () => {
      const other = await otherAccount(bed);
      const created = await bed.api('POST', other.base, { key: other.key, body: { domain: 'theirs.com' } });
      expect(created.status).to.equal(201);
      for (const [method, path, body] of [
        ['GET', '', undefined],
        ['PUT', '', { media_subdomain: 'mine' }],
        ['DELETE', '', undefined],
        ['POST', '/check-dns', undefined],
      ] as const) {
        const res = await bed.api(method, `${bed.base}/theirs.com${path}`, body ? { body } : {});
        expect(res.status, `${method} ${path}`).to.equal(404);
      }
      expect(bed.dns.queries).to.deep.equal([]);
      const theirs = await bed.api('GET', `${other.base}/theirs.com`, { key: other.key });
      expect(theirs.body).to.deep.equal(created.body);
      expect((await bed.api('GET', bed.base)).body.data).to.deep.equal([]);
    });
  });

  describe('scopes', () => {
    it('needs domains:read to list and get a domain', async () => {
      await bed.create('example.com');
      const without = await keyWith(['accounts:read', 'domains:write']);
      expect((await bed.api('GET', bed.base, { key: without })).status).to.equal(403);
      expect((await bed.api('GET', `${bed.base}/example.com`, { key: without })).status).to.equal(403);
      const reader = await keyWith(['domains:read']);
      expect((await bed.api('GET', bed.base, { key: reader })).status).to.equal(200);
      expect((await bed.api('GET', `${bed.base}/example.com`, { key: reader })).status).to.equal(200);
    });

    it('needs domains:write to create, update and check DNS', async () => {
      await bed.create('example.com');
      const reader = await keyWith(['domains:read', 'domains:delete:all']);
      const denied = [
        await bed.api('POST', bed.base, { key: reader, body: { domain: 'new.com' } }),
        await bed.api('PUT', `${bed.base}/example.com`, { key: reader, body: { media_subdomain: 'm' } }),
        await bed.api('POST', `${bed.base}/example.com/check-dns`, { key: reader }),
      ];
      for (const res of denied) {
        expect(res.status).to.equal(403);
        expect(res.body.message).to.equal('Insufficient permissions for the required scope');
      }
      expect((await bed.api('GET', `${bed.base}/new.com`)).status).to.equal(404);
      expect((await bed.get('example.com')).media_subdomain).to.equal('media');

      const writer = await keyWith(['domains:write']);
      expect((await bed.api('POST', bed.base, { key: writer, body: { domain: 'new.com' } })).status).to.equal(201);
      expect((await bed.api('PUT', `${bed.base}/example.com`, { key: writer, body: { media_subdomain: 'm' } })).status).to.equal(200);
      expect((await bed.api('POST', `${bed.base}/example.com/check-dns`, { key: writer })).status).to.equal(200);
    });

    it('needs domains:delete:all or domains:delete naming that very domain to delete it', async () => {
      await bed.create('example.com');
      await bed.create('other.com');
      const writer = await keyWith(['domains:read', 'domains:write']);
      expect((await bed.api('DELETE', `${bed.base}/example.com`, { key: writer })).status).to.equal(403);
      const forOther = await keyWith(['domains:delete:{other.com}']);
      const denied = await bed.api('DELETE', `${bed.base}/example.com`, { key: forOther });
      expect(denied.status).to.equal(403);
      expect(denied.body.message).to.equal('Insufficient permissions for the required scope');
      expect((await bed.api('GET', `${bed.base}/example.com`)).status).to.equal(200);

      const forExample = await keyWith(['domains:delete:{example.com}']);
      expect((await bed.api('DELETE', `${bed.base}/example.com`, { key: forExample })).status).to.equal(200);
      const forAll = await keyWith(['domains:delete:all']);
      expect((await bed.api('DELETE', `${bed.base}/other.com`, { key: forAll })).status).to.equal(200);
    });
  });

  describe('delete', () => {
    it('deletes a domain: 200 with a message, then 404, and the name can be added again', async () => {
      await bed.create('example.com');
      const res = await bed.api('DELETE', `${bed.base}/example.com`);
      expect(res.status).to.equal(200);
      expect(res.body.message).to.be.a('string').and.contain('example.com');
      expect((await bed.api('GET', `${bed.base}/example.com`)).status).to.equal(404);
      expect((await bed.api('DELETE', `${bed.base}/example.com`)).status).to.equal(404);
      expect((await bed.api('GET', bed.base)).body.data).to.deep.equal([]);
      await bed.create('example.com');
    });

    it('removes the API-key scopes that name the deleted domain, and only those', async () => {
      await bed.create('example.com');
      await bed.create('other.com');
      const created = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/api-keys`, {
        body: { label: 'sender', scopes: ['messages:send:{example.com}', 'messages:send:{other.com}', 'domains:read'] },
      });
      expect(created.status).to.equal(201);
      expect((await bed.api('DELETE', `${bed.base}/example.com`)).status).to.equal(200);
      const key = await bed.api('GET', `/v2/accounts/${bed.server.accountId}/api-keys/${created.body.id}`);
      expect(key.status).to.equal(200);
      const scopes = key.body.scopes.map((s: { scope: string }) => s.scope);
      expect(scopes).to.have.members(['messages:send:{other.com}', 'domains:read']);
    });

    it('removes its DKIM key files', async () => {
      const d = await bed.create('example.com', { dkim_rotation_interval_days: 7 });
      expect(readdirSync(keyDir(bed, d.id))).to.have.length(2);
      expect((await bed.api('DELETE', `${bed.base}/example.com`)).status).to.equal(200);
      expect(existsSync(keyDir(bed, d.id))).to.equal(false);
    });
  });
  describe('DKIM private keys', () => {
    it('keeps each private key as a PEM file with mode 0600 under keys/dkim/<domain id>/, matching its published key', async () => {
      const d = await bed.create('example.com', { dkim_rotation_interval_days: 7 });
      const dir = keyDir(bed, d.id);
      expect(statSync(dir).mode & 0o777).to.equal(0o700);
      const records = [activeDkimOf(d), standbyDkimOf(d)];
      const files = records.map((r) => `${r.host.split('.')[0]}.pem`);
      expect(readdirSync(dir).sort()).to.deep.equal([...files].sort());
      for (const [i, file] of files.entries()) {
        const path = join(dir, file);
        expect(statSync(path).mode & 0o777, file).to.equal(0o600);
        const pem = readFileSync(path, 'utf8');
        expect(pem).to.match(/^-----BEGIN PRIVATE KEY-----\n/);
        const p = (createPublicKey(pem).export({ type: 'spki', format: 'der' }) as Buffer).toString('base64');
        expect(records[i]!.content).to.equal(`v=DKIM1; k=rsa; p=${p}`);
      }
    });

    it('never puts a private key in an API response or in the store', async () => {
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
      const secretLine = pem.split('\n')[1]!;
      const responses: CallResult[] = [];
      const keep = async (res: Promise<CallResult>) => {
        const r = await res;
        responses.push(r);
        return r;
      };
      expect(
        (await keep(bed.api('POST', bed.base, { body: { domain: 'example.com', dkim_private_key: pem }, headers: { 'idempotency-key': 'k1' } }))).status,
      ).to.equal(201);
      await keep(bed.api('POST', bed.base, { body: { domain: 'example.com', dkim_private_key: pem }, headers: { 'idempotency-key': 'k1' } }));
      await keep(bed.api('POST', bed.base, { body: { domain: 'other.com', dkim_rotation_interval_days: 7 } }));
      await keep(bed.api('GET', bed.base));
      await keep(bed.api('GET', `${bed.base}/example.com`));
      await keep(bed.api('PUT', `${bed.base}/example.com`, { body: { dkim_selector: 'renamed', dkim_rotation_interval_days: 3 } }));
      await keep(bed.api('POST', `${bed.base}/example.com/check-dns`));
      await keep(bed.api('DELETE', `${bed.base}/other.com`));
      expect(responses).to.have.length(8);
      for (const res of responses) {
        const text = JSON.stringify(res.body);
        expect(text).to.not.contain('PRIVATE KEY');
        expect(text).to.not.contain(secretLine);
      }
      await bed.server.daemon.stop();
      expect(await storeContains(bed.server, 'PRIVATE KEY')).to.equal(false);
      expect(await storeContains(bed.server, secretLine)).to.equal(false);
    });
  });
});
