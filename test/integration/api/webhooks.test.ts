import { expect } from 'chai';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { EVERY_GLOBAL_SCOPE } from '../../../src/accounts/scopes.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { itFollowsTargetUrlRules } from '../../helpers/target-url-rules.ts';
import { onPostgres } from '../../helpers/backend.ts';
import { call, ManualClock, startServer, storeContains, type CallOptions, type TestServer } from '../../helpers/harness.ts';

const UNKNOWN_ID = '01890a5d-ac96-774b-bcce-b302099a8057';
const SECRET = /^aha-whsec-[A-Za-z0-9]{64}$/;
/** A public address: saving a webhook never connects, so nothing is sent there. */
const PUBLIC_IP = '93.184.216.34';

interface ApiWebhook {
  id: string;
  name: string;
  url: string;
  enabled: boolean;
  scope: 'global' | 'scoped';
  domains: string[];
  secret?: string;
  [field: string]: unknown;
}

describe('Webhooks resource', () => {
  let server: TestServer;
  let dns: TestDnsServer;
  let account: string;
  let base: string;

  before(async () => {
    dns = await startDnsServer();
    dns.zone.set('hooks.example.com', 'A', [PUBLIC_IP]);
    dns.zone.set('rebind.example.com', 'A', ['127.0.0.1']);
    dns.zone.set('mixed.example.com', 'A', [PUBLIC_IP, '10.0.0.7']);
    dns.zone.set('metadata.example.com', 'A', ['169.254.169.254']);
    // Many requests in a burst: the rate limit (its own tests) stays out of the way.
    const many = { per_second: 100_000, burst: 100_000 };
    server = await startServer({
      clock: new ManualClock(),
      config: { dns: { servers: [dns.address], timeout_ms: 1000, tries: 1 }, api: { rate_limits: { general: many } } },
    });
    account = `/v2/accounts/${server.accountId}`;
    base = `${account}/webhooks`;
    for (const domain of ['example.com', 'example.org', 'example.net']) {
      const res = await call(server, 'POST', `${account}/domains`, { body: { domain } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
    }
  });
  after(async () => {
    await server.stop();
    await dns.close();
  });

  const api = (method: string, path: string, options?: CallOptions) => call(server, method, path, options);

  async function create(body: object, options: CallOptions = {}): Promise<ApiWebhook> {
    const res = await api('POST', base, { body, ...options });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body as ApiWebhook;
  }

  async function keyWith(scopes: string[]): Promise<string> {
    return (await server.daemon.core.apiKeys.create(server.accountId, { label: scopes.join(' ').slice(0, 200), scopes })).secret;
  }

  async function everyListed(key?: string, query = ''): Promise<ApiWebhook[]> {
    const out: ApiWebhook[] = [];
    let after: string | undefined;
    for (;;) {
      const res = await api('GET', `${base}?limit=2${query}${after ? `&after=${after}` : ''}`, key ? { key } : {});
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      out.push(...res.body.data);
      if (!res.body.pagination.has_more) return out;
      after = res.body.pagination.next_cursor;
    }
  }

  const hook = (extra: object = {}) => ({ name: 'Events', url: 'https://hooks.example.com/postilion', scope: 'global', ...extra });

  describe('create and read', () => {
    it('creates a global webhook with defaults, zero counters and a secret shown only in the 201', async () => {
      const created = await create(hook({ on_bounced: true, domains: ['example.com'] }));
      expect(created.secret).to.match(SECRET);
      expect(created).to.include({
        object: 'webhook',
        name: 'Events',
        url: 'https://hooks.example.com/postilion',
        enabled: true,
        scope: 'global',
        on_bounced: true,
        on_delivered: false,
        on_dns_error: false,
        success_count: 0,
        error_count: 0,
        errors_since_last_success: 0,
        last_request_at: null,
      });
      // `domains` of a global webhook are accepted and ignored.
      expect(created.domains).to.deep.equal([]);

      const read = await api('GET', `${base}/${created.id}`);
      expect(read.status).to.equal(200);
      expect(read.body).to.not.have.property('secret');
      expect(JSON.stringify(read.body)).to.not.include(created.secret!);
      const listed = (await everyListed()).find((w) => w.id === created.id)!;
      expect(listed).to.not.have.property('secret');
      expect(listed).to.deep.equal(read.body);
    });

    it('keeps the secret sealed but usable to sign, with a 0600 key file under keys/', async () => {
      const created = await create(hook());
      const record = await server.daemon.core.webhooks.get(server.accountId, created.id);
      expect(record.secret).to.not.include(created.secret!);
      expect(server.daemon.core.webhooks.secretOf(record)).to.equal(created.secret);
      const keyFile = join(server.config.keys.dir, 'webhook-secrets.key');
      // In cluster mode the key is the cluster's, sealed in its database: no file of this node's.
      if (onPostgres) expect(existsSync(keyFile)).to.equal(false);
      else expect(statSync(keyFile).mode & 0o777).to.equal(0o600);
    });

    it('gives every webhook its own secret', async () => {
      const a = await create(hook());
      const b = await create(hook());
      expect(a.secret).to.not.equal(b.secret);
    });

    it('creates a scoped webhook for domains of the account, normalising their names', async () => {
      const created = await create(hook({ scope: 'scoped', domains: ['Example.COM.', 'example.org', 'example.com'] }));
      expect(created.domains).to.deep.equal(['example.com', 'example.org']);
    });

    it('refuses a scoped webhook without domains, or with a domain of no account of ours', async () => {
      for (const domains of [undefined, null, []]) {
        const res = await api('POST', base, { body: hook({ scope: 'scoped', domains }) });
        expect(res.status, JSON.stringify(domains)).to.equal(400);
        expect(res.body.message).to.include('domains');
      }
      const res = await api('POST', base, { body: hook({ scope: 'scoped', domains: ['other.test'] }) });
      expect(res.status).to.equal(400);
      expect(res.body.message).to.equal('domain other.test is not a domain of this account');
    });

    it('filters the list by enabled and by event flags, page by page', async () => {
      const off = await create(hook({ name: 'off', enabled: false, on_clicked: true }));
      const clicks = await create(hook({ name: 'clicks', on_clicked: true }));
      const disabled = await everyListed(undefined, '&enabled=false');
      expect(disabled.map((w) => w.id))
        .to.include(off.id)
        .and.not.include(clicks.id);
      expect(disabled.every((w) => w.enabled === false)).to.equal(true);
      const clicked = await everyListed(undefined, '&on_clicked=true&enabled=true');
      expect(clicked.map((w) => w.id)).to.deep.equal([clicks.id]);
      const res = await api('GET', `${base}?on_clicked=yes`);
      expect(res.status).to.equal(400);
      expect(res.body.message).to.equal('on_clicked: on_clicked must be true or false');
    });

    it('pages forwards and backwards in creation order', async () => {
      const all = await everyListed();
      const ids = all.map((w) => w.id);
      expect(ids).to.deep.equal([...ids].sort());
      const first = await api('GET', `${base}?limit=2`);
      const second = await api('GET', `${base}?limit=2&after=${first.body.pagination.next_cursor}`);
      const back = await api('GET', `${base}?limit=2&before=${second.body.pagination.previous_cursor}`);
      expect(back.body.data.map((w: ApiWebhook) => w.id)).to.deep.equal(first.body.data.map((w: ApiWebhook) => w.id));
    });
  });

  describe('update and delete', () => {
    it('updates only the fields given; null and absent leave a field as it is', async () => {
      const created = await create(hook({ on_delivered: true }));
      const res = await api('PUT', `${base}/${created.id}`, { body: { name: 'Renamed', url: null, on_failed: true, on_delivered: null } });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body).to.include({ name: 'Renamed', url: created.url, on_failed: true, on_delivered: true, enabled: true });
      expect(res.body).to.not.have.property('secret');
      const disabled = await api('PUT', `${base}/${created.id}`, { body: { enabled: false, url: `http://${PUBLIC_IP}:8080/x` } });
      expect(disabled.body).to.include({ enabled: false, url: `http://${PUBLIC_IP}:8080/x`, name: 'Renamed' });
    });

    it('switches scope: to scoped only with domains in the same request, to global dropping them, [] clearing them', async () => {
      const created = await create(hook());
      const bare = await api('PUT', `${base}/${created.id}`, { body: { scope: 'scoped' } });
      expect(bare.status).to.equal(400);
      expect(bare.body.message).to.equal('domains must name at least one domain when a webhook becomes scoped');
      const scoped = await api('PUT', `${base}/${created.id}`, { body: { scope: 'scoped', domains: ['example.org'] } });
      expect(scoped.body).to.include({ scope: 'scoped' });
      expect(scoped.body.domains).to.deep.equal(['example.org']);
      const kept = await api('PUT', `${base}/${created.id}`, { body: { name: 'kept', domains: null } });
      expect(kept.body.domains).to.deep.equal(['example.org']);
      const replaced = await api('PUT', `${base}/${created.id}`, { body: { domains: ['example.net', 'example.com'] } });
      expect(replaced.body.domains).to.deep.equal(['example.net', 'example.com']);
      const cleared = await api('PUT', `${base}/${created.id}`, { body: { domains: [] } });
      expect(cleared.body).to.include({ scope: 'scoped' });
      expect(cleared.body.domains).to.deep.equal([]);
      const global = await api('PUT', `${base}/${created.id}`, { body: { scope: 'scoped', domains: ['example.com'] } });
      expect(global.body.domains).to.deep.equal(['example.com']);
      const back = await api('PUT', `${base}/${created.id}`, { body: { scope: 'global' } });
      expect(back.body).to.include({ scope: 'global' });
      expect(back.body.domains).to.deep.equal([]);
      expect((await server.daemon.core.webhooks.get(server.accountId, created.id)).domains).to.deep.equal([]);
    });

    it('deletes a webhook, which is then not found', async () => {
      const created = await create(hook({ name: 'gone' }));
      const res = await api('DELETE', `${base}/${created.id}`);
      expect(res.status).to.equal(200);
      expect(res.body.message).to.equal(`webhook ${created.id} (gone) deleted successfully`);
      expect((await api('GET', `${base}/${created.id}`)).status).to.equal(404);
      expect((await everyListed()).map((w) => w.id)).to.not.include(created.id);
    });

    it('answers 404 for unknown ids and for webhooks of another account, 400 for malformed ids', async () => {
      for (const [method, body] of [
        ['GET', undefined],
        ['PUT', { name: 'x' }],
        ['DELETE', undefined],
      ] as const) {
        const res = await api(method, `${base}/${UNKNOWN_ID}`, body ? { body } : {});
        expect(res.status, method).to.equal(404);
        expect(res.body.message).to.equal('webhook not found');
        expect((await api(method, `${base}/not-a-uuid`, body ? { body } : {})).status, method).to.equal(400);
      }
      const core = server.daemon.core;
      const other = await core.accounts.create({ name: 'Other', website: 'https://other.example', ownerEmail: 'owner@other.example' });
      const key = (await core.apiKeys.create(other.id, { label: 'other', scopes: EVERY_GLOBAL_SCOPE })).secret;
      const mine = await create(hook());
      for (const method of ['GET', 'DELETE']) {
        expect((await api(method, `/v2/accounts/${other.id}/webhooks/${mine.id}`, { key })).status).to.equal(404);
      }
      const theirs = await api('GET', `/v2/accounts/${other.id}/webhooks`, { key });
      expect(theirs.body.data).to.deep.equal([]);
    });
  });

  describe('target rules', () => {
    const refused: Array<[string, string]> = [
      ['not a url', 'url must not contain spaces or control characters'],
      ['example.com/hook', 'url must be an absolute http or https URL'],
      ['ftp://hooks.example.com/', 'url scheme ftp is not allowed; use http or https'],
      ['javascript:alert(1)', 'url scheme javascript is not allowed; use http or https'],
      ['http://10.1.2.3/hook', 'a private address'],
      ['http://192.168.0.10/hook', 'a private address'],
      ['http://172.16.5.4/hook', 'a private address'],
      ['http://127.0.0.1:8080/hook', 'a loopback address'],
      ['http://[::1]/hook', 'a loopback address'],
      ['http://[::ffff:127.0.0.1]/hook', 'a loopback address'],
      ['http://169.254.169.254/latest/meta-data/', 'a link-local address'],
      ['http://100.64.0.1/', 'a carrier-grade NAT (CGNAT) address'],
      ['http://224.0.0.1/', 'a multicast address'],
      ['http://0.0.0.0/', 'an unspecified address'],
      ['http://[fd00::1]/', 'a private (unique local) address'],
      ['http://[fe80::1]/', 'a link-local address'],
      ['http://localhost:3000/', 'a loopback name'],
      ['http://rebind.example.com/hook', 'resolves to 127.0.0.1, a loopback address'],
      ['http://metadata.example.com/latest/meta-data/', 'resolves to 169.254.169.254, a link-local address'],
      // Other spellings of the same addresses.
      ['http://2130706433/hook', 'url host 127.0.0.1 is a loopback address'],
      ['http://127.1/hook', 'url host 127.0.0.1 is a loopback address'],
      ['http://[0:0:0:0:0:ffff:7f00:1]/hook', 'a loopback address'],
      ['http://[::ffff:169.254.169.254]/', 'a link-local address'],
      ['http://[::ffff:10.1.2.3]/hook', 'a private address'],
      ['http://mixed.example.com/hook', 'resolves to 10.0.0.7, a private address'],
      ['https://user:pw@hooks.example.com/', 'must not contain a user name or password'],
      [`https://hooks.example.com/${'a'.repeat(2048)}`, 'url must be at most 2048 characters'],
    ];

    it('refuses bad and private URLs at create with 400 and a clear message, writing nothing', async () => {
      const before = (await everyListed()).length;
      for (const [url, message] of refused) {
        const res = await api('POST', base, { body: hook({ url }) });
        expect(res.status, url).to.equal(400);
        expect(res.body.message, url).to.include(message);
      }
      expect((await everyListed()).length).to.equal(before);
    });

    it('refuses the same URLs at update, leaving the webhook as it was', async () => {
      const created = await create(hook());
      for (const [url, message] of refused) {
        const res = await api('PUT', `${base}/${created.id}`, { body: { url, name: 'changed' } });
        expect(res.status, url).to.equal(400);
        expect(res.body.message, url).to.include(message);
      }
      const read = await api('GET', `${base}/${created.id}`);
      expect(read.body).to.include({ url: created.url, name: created.name });
    });

    it('accepts a public name and a public literal', async () => {
      expect((await create(hook({ url: 'http://hooks.example.com:8443/a?b=c' }))).url).to.equal('http://hooks.example.com:8443/a?b=c');
      expect((await create(hook({ url: `https://${PUBLIC_IP}/x` }))).url).to.equal(`https://${PUBLIC_IP}/x`);
    });

    itFollowsTargetUrlRules({ refused, body: hook, create, api, base: () => base, dns: () => dns });
  });

  describe('bounded input', () => {
    it('refuses over-long and malformed fields with 400 naming them', async () => {
      const cases: Array<[object, string]> = [
        [hook({ name: 'n'.repeat(256) }), 'name must be at most 255 characters'],
        [hook({ name: '  ' }), 'name must be 1 to 255 characters'],
        [hook({ name: 'bad\u0007name' }), 'name must not contain control characters'],
        [hook({ url: 42 }), 'url'],
        [hook({ scope: 'everything' }), 'scope must be "global" or "scoped"'],
        [hook({ on_bounced: 'yes' }), 'on_bounced'],
        [hook({ scope: 'scoped', domains: Array.from({ length: 101 }, (_, i) => `d${i}.example.com`) }), 'domains may name at most 100 domains'],
        [hook({ scope: 'scoped', domains: [`${'a'.repeat(250)}.com`] }), 'domain names are at most 253 characters'],
        [hook({ scope: 'scoped', domains: ['not a domain'] }), 'invalid domain name'],
        [hook({ secret: 'aha-whsec-mine' }), 'unknown field secret'],
        [{ url: 'https://hooks.example.com/', scope: 'global' }, 'name'],
      ];
      for (const [body, message] of cases) {
        const res = await api('POST', base, { body });
        expect(res.status, JSON.stringify(body).slice(0, 100)).to.equal(400);
        expect(res.body.message, JSON.stringify(body).slice(0, 100)).to.include(message);
      }
      const created = await create(hook());
      for (const body of [{ name: 'n'.repeat(256) }, { secret: 'x' }, { enabled: 'no' }, { domains: 'example.com' }]) {
        const res = await api('PUT', `${base}/${created.id}`, { body });
        expect(res.status, JSON.stringify(body).slice(0, 100)).to.equal(400);
      }
      expect((await api('PUT', `${base}/${created.id}`, { rawBody: '{"name":', headers: { 'content-type': 'application/json' } })).status).to.equal(400);
    });
  });

  describe('scopes', () => {
    let hooks: { global: ApiWebhook; com: ApiWebhook; org: ApiWebhook; both: ApiWebhook };
    let comKey: string;

    before(async () => {
      hooks = {
        global: await create(hook({ name: 'scope-global' })),
        com: await create(hook({ name: 'scope-com', scope: 'scoped', domains: ['example.com'] })),
        org: await create(hook({ name: 'scope-org', scope: 'scoped', domains: ['example.org'] })),
        both: await create(hook({ name: 'scope-both', scope: 'scoped', domains: ['example.com', 'example.org'] })),
      };
      comKey = await keyWith(['webhooks:read:{example.com}', 'webhooks:write:{example.com}', 'webhooks:delete:{example.com}']);
    });

    it('lists for a domain-scoped key only webhooks touching its domains', async () => {
      const seen = (await everyListed(comKey)).map((w) => w.name);
      expect(seen).to.include.members(['scope-com', 'scope-both']);
      expect(seen).to.not.include.members(['scope-global', 'scope-org']);
      const none = await keyWith(['webhooks:read:{example.net}']);
      expect((await everyListed(none)).filter((w) => w.name.startsWith('scope-'))).to.deep.equal([]);
    });

    it('reads a webhook through any one of its domains, not a global one', async () => {
      expect((await api('GET', `${base}/${hooks.com.id}`, { key: comKey })).status).to.equal(200);
      expect((await api('GET', `${base}/${hooks.both.id}`, { key: comKey })).status).to.equal(200);
      for (const id of [hooks.global.id, hooks.org.id]) {
        const res = await api('GET', `${base}/${id}`, { key: comKey });
        expect(res.status).to.equal(403);
        expect(res.body.message).to.include('permissions');
      }
    });

    it('creates only webhooks scoped to domains the key may write', async () => {
      expect((await api('POST', base, { key: comKey, body: hook({ scope: 'scoped', domains: ['example.com'] }) })).status).to.equal(201);
      const global = await api('POST', base, { key: comKey, body: hook() });
      expect(global.status).to.equal(403);
      expect(global.body.message).to.equal('this API key may not create webhooks that are not scoped to its domains');
      const wider = await api('POST', base, { key: comKey, body: hook({ scope: 'scoped', domains: ['example.com', 'example.org'] }) });
      expect(wider.status).to.equal(403);
      expect(wider.body.message).to.equal('this API key may not create webhooks of example.org');
    });

    it('updates and deletes only webhooks all of whose domains the key holds, before and after', async () => {
      expect((await api('PUT', `${base}/${hooks.com.id}`, { key: comKey, body: { on_opened: true } })).status).to.equal(200);
      for (const id of [hooks.global.id, hooks.org.id, hooks.both.id]) {
        expect((await api('PUT', `${base}/${id}`, { key: comKey, body: { on_opened: true } })).status, id).to.equal(403);
        expect((await api('DELETE', `${base}/${id}`, { key: comKey })).status, id).to.equal(403);
      }
      const widen = await api('PUT', `${base}/${hooks.com.id}`, { key: comKey, body: { domains: ['example.com', 'example.org'] } });
      expect(widen.status).to.equal(403);
      const toGlobal = await api('PUT', `${base}/${hooks.com.id}`, { key: comKey, body: { scope: 'global' } });
      expect(toGlobal.status).to.equal(403);
      // Nothing of the refused updates was written.
      const read = await api('GET', `${base}/${hooks.both.id}`);
      expect(read.body.on_opened).to.equal(false);
      expect((await api('GET', `${base}/${hooks.com.id}`)).body.domains).to.deep.equal(['example.com']);
      expect((await api('DELETE', `${base}/${hooks.com.id}`, { key: comKey })).status).to.equal(200);
    });

    it('refuses keys without any webhooks scope', async () => {
      const key = await keyWith(['domains:read']);
      expect((await api('GET', base, { key })).status).to.equal(403);
      expect((await api('POST', base, { key, body: hook() })).status).to.equal(403);
    });
  });

  describe('idempotent create', () => {
    it('replays the 201 with the same secret to the same key, and shows it to no other key', async () => {
      const headers = { 'idempotency-key': 'webhook-create-1' };
      const first = await api('POST', base, { body: hook({ name: 'idem' }), headers });
      expect(first.status).to.equal(201);
      expect(first.headers.get('idempotent-replayed')).to.equal(null);
      const again = await api('POST', base, { body: hook({ name: 'idem' }), headers });
      expect(again.status).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      expect((await everyListed()).filter((w) => w.name === 'idem')).to.have.length(1);

      const other = await keyWith(EVERY_GLOBAL_SCOPE);
      const stolen = await api('POST', base, { key: other, body: hook({ name: 'idem' }), headers });
      expect(stolen.status).to.equal(422);
      expect(JSON.stringify(stolen.body)).to.not.include(first.body.secret);
      const changed = await api('POST', base, { body: hook({ name: 'idem 2' }), headers });
      expect(changed.status).to.equal(422);
    });
  });

  describe('at rest', () => {
    it('never stores a secret in clear, and keeps webhooks across a restart', async () => {
      const created = await create(hook({ name: 'durable' }));
      const idem = await api('POST', base, { body: hook({ name: 'durable-idem' }), headers: { 'idempotency-key': 'at-rest-1' } });
      const { accountId, adminKey } = server;
      await server.daemon.stop();
      expect(await storeContains(server, created.secret!)).to.equal(false);
      expect(await storeContains(server, idem.body.secret)).to.equal(false);
      expect(await storeContains(server, 'aha-whsec-')).to.equal(false);
      server = { ...(await server.restart()), accountId, adminKey };
      const read = await api('GET', `${base}/${created.id}`);
      expect(read.status).to.equal(200);
      const record = await server.daemon.core.webhooks.get(accountId, created.id);
      expect(server.daemon.core.webhooks.secretOf(record)).to.equal(created.secret);
    });
  });
});

describe('Webhooks resource with webhooks.allow_networks', () => {
  let server: TestServer;
  let dns: TestDnsServer;

  before(async () => {
    dns = await startDnsServer();
    dns.zone.set('receiver.test', 'A', ['127.0.0.1']);
    server = await startServer({
      config: { dns: { servers: [dns.address], timeout_ms: 1000, tries: 1 }, webhooks: { allow_networks: ['127.0.0.0/8', '10.20.0.0/16'] } },
    });
  });
  after(async () => {
    await server.stop();
    await dns.close();
  });

  it('accepts targets inside an allowed network, by literal or by name, and still refuses the rest', async () => {
    const base = `/v2/accounts/${server.accountId}/webhooks`;
    for (const url of ['http://127.0.0.1:9000/hook', 'http://receiver.test:9000/hook', 'http://10.20.3.4/hook', 'http://[::ffff:127.0.0.1]/x']) {
      const res = await call(server, 'POST', base, { body: { name: 'lan', url, scope: 'global' } });
      expect(res.status, `${url} ${JSON.stringify(res.body)}`).to.equal(201);
    }
    for (const url of ['http://10.21.0.1/hook', 'http://[::1]/hook', 'http://169.254.169.254/']) {
      expect((await call(server, 'POST', base, { body: { name: 'lan', url, scope: 'global' } })).status, url).to.equal(400);
    }
  });
});
