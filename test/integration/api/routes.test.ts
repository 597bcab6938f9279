import { expect } from 'chai';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { EVERY_GLOBAL_SCOPE } from '../../../src/accounts/scopes.ts';
import { matches } from '../../../src/inbound/policy.ts';
import { MAX_ROUTES_PER_ACCOUNT } from '../../../src/inbound/routes.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { itFollowsTargetUrlRules } from '../../helpers/target-url-rules.ts';
import { onPostgres } from '../../helpers/backend.ts';
import { call, ManualClock, startServer, storeContains, type CallOptions, type TestServer } from '../../helpers/harness.ts';

/**
 * The Routes resource (reference-api §6): every operation, each response checked against the
 * contract by `call()`; recipient patterns; scopes by the pattern's domain; the secret shown once
 * and kept sealed; the webhook target rules; bounded input. Forwarding is in
 * test/integration/inbound/routes.test.ts.
 */

const UNKNOWN_ID = '01890a5d-ac96-774b-bcce-b302099a8057';
const SECRET = /^aha-rsec-[A-Za-z0-9]{64}$/;
/** A public address: saving a route never connects, so nothing is sent there. */
const PUBLIC_IP = '93.184.216.34';

interface ApiRoute {
  id: string;
  name: string;
  url: string;
  recipient: string;
  enabled: boolean;
  secret?: string;
  [field: string]: unknown;
}

describe('Routes resource', () => {
  let server: TestServer;
  let dns: TestDnsServer;
  let clock: ManualClock;
  let account: string;
  let base: string;

  before(async () => {
    dns = await startDnsServer();
    dns.zone.set('hooks.example.com', 'A', [PUBLIC_IP]);
    dns.zone.set('rebind.example.com', 'A', ['127.0.0.1']);
    dns.zone.set('metadata.example.com', 'A', ['169.254.169.254']);
    clock = new ManualClock();
    // The manual clock never moves the rate limiter's window on: a budget the whole file fits in.
    const many = { per_second: 100_000, burst: 100_000 };
    server = await startServer({ clock, config: { dns: { servers: [dns.address], timeout_ms: 1000, tries: 1 }, api: { rate_limits: { general: many } } } });
    account = `/v2/accounts/${server.accountId}`;
    base = `${account}/routes`;
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

  async function create(body: object, options: CallOptions = {}): Promise<ApiRoute> {
    const res = await api('POST', base, { body, ...options });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body as ApiRoute;
  }

  async function keyWith(scopes: string[]): Promise<string> {
    return (await server.daemon.core.apiKeys.create(server.accountId, { label: scopes.join(' ').slice(0, 200), scopes })).secret;
  }

  async function everyListed(key?: string, query = ''): Promise<ApiRoute[]> {
    const out: ApiRoute[] = [];
    let after: string | undefined;
    for (;;) {
      const res = await api('GET', `${base}?limit=2${query}${after ? `&after=${after}` : ''}`, key ? { key } : {});
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      out.push(...res.body.data);
      if (!res.body.pagination.has_more) return out;
      after = res.body.pagination.next_cursor;
    }
  }

  let serial = 0;
  /** A valid route body; each call a new exact address unless `recipient` is given. */
  const route = (extra: object = {}) => ({ name: 'Support', url: 'https://hooks.example.com/inbound', recipient: `box-${++serial}@example.com`, ...extra });

  describe('create and read', () => {
    it('creates a route with the defaults, zero counters and a secret shown only in the 201', async () => {
      const created = await create(route({ recipient: 'help@example.com' }));
      expect(created).to.include({
        object: 'route',
        name: 'Support',
        url: 'https://hooks.example.com/inbound',
        recipient: 'help@example.com',
        attachments: false,
        headers: false,
        group_by_message_id: false,
        strip_replies: false,
        enabled: true,
        success_count: 0,
        error_count: 0,
        errors_since_last_success: 0,
        last_request_at: null,
      });
      expect(created.secret).to.match(SECRET);
      expect(created.created_at).to.equal(new Date(clock.ms).toISOString());
      expect(created.updated_at).to.equal(created.created_at);

      const read = await api('GET', `${base}/${created.id}`);
      expect(read.status).to.equal(200);
      expect(read.body).to.not.have.property('secret');
      const { secret: _secret, ...shown } = created;
      expect(read.body).to.deep.equal(shown);
      const listed = (await everyListed()).find((r) => r.id === created.id);
      expect(listed).to.deep.equal(shown);
      expect(JSON.stringify(await everyListed())).to.not.include(created.secret);
    });

    it('keeps every option given at create', async () => {
      const options = { attachments: true, headers: true, group_by_message_id: true, strip_replies: true, enabled: false };
      const created = await create(route(options));
      expect(created).to.include(options);
      expect((await api('GET', `${base}/${created.id}`)).body).to.include(options);
    });

    it('accepts every pattern kind, lower-casing it and normalising its domain', async () => {
      const cases: Array<[string, string]> = [
        ['Sales@Example.COM', 'sales@example.com'],
        ['*@example.org', '*@example.org'],
        ['Ticket-*@example.com', 'ticket-*@example.com'],
        ['*-Support@example.net', '*-support@example.net'],
        ['x.y+z@example.com.', 'x.y+z@example.com'],
      ];
      for (const [recipient, stored] of cases) {
        expect((await create(route({ recipient }))).recipient, recipient).to.equal(stored);
      }
    });

    it("refuses bad patterns and domains that are not the account's with 400 and a message, writing nothing", async () => {
      const before = (await everyListed()).length;
      const cases: Array<[unknown, string]> = [
        ['', 'recipient "" is not valid'],
        ['   ', 'is not valid'],
        ['support', 'has no local part or no domain'],
        ['@example.com', 'has no local part or no domain'],
        ['support@', 'has no local part or no domain'],
        ['**@example.com', 'may have one * only'],
        ['*a*@example.com', 'may have one * only'],
        ['tick*et@example.com', 'may have one * only'],
        ['a b@example.com', 'is not valid'],
        ['a\u0000b@example.com', 'is not valid'],
        ['a\r\nBcc: x@example.org', 'is not valid'],
        ['a..b@example.com', 'has an invalid local part'],
        ['"q"@example.com', 'has an invalid local part'],
        [`${'a'.repeat(65)}@example.com`, 'has an invalid local part'],
        [`a@${'b'.repeat(252)}.com`, 'recipient must be at most 255 characters'],
        ['x@not-ours.example', 'domain not-ours.example of recipient is not a domain of this account'],
        ['x@sub.example.com', 'domain sub.example.com of recipient is not a domain of this account'],
        ['x@not_a_domain', 'is not a domain of this account'],
        [42, 'recipient'],
        [['a@example.com'], 'recipient'],
        [{ local: 'a' }, 'recipient'],
        [null, 'recipient'],
      ];
      for (const [recipient, message] of cases) {
        const res = await api('POST', base, { body: route({ recipient }) });
        expect(res.status, JSON.stringify(recipient)).to.equal(400);
        expect(res.body.message, JSON.stringify(recipient)).to.include(message);
      }
      const missing = await api('POST', base, { body: { name: 'r', url: 'https://hooks.example.com/' } });
      expect(missing.status).to.equal(400);
      expect(missing.body.message).to.include('recipient');
      expect((await everyListed()).length).to.equal(before);
    });

    it('gives every route its own secret, sealed under a 0600 key file of its own', async () => {
      const a = await create(route());
      const b = await create(route());
      expect(a.secret).to.not.equal(b.secret);
      const keyFile = join(server.config.keys.dir, 'route-secrets.key');
      // In cluster mode the key is the cluster's, sealed in its database: no file of this node's.
      if (onPostgres) expect(existsSync(keyFile)).to.equal(false);
      else expect(statSync(keyFile).mode & 0o777).to.equal(0o600);
      const routes = server.daemon.core.routes;
      const record = await server.daemon.core.routes.target(a.id);
      expect(record!.secret).to.not.include(a.secret!);
      expect(routes.secretOf(record!)).to.equal(a.secret);
    });

    it('filters the list by domain, case-insensitively, and pages forwards and backwards in creation order', async () => {
      const made: ApiRoute[] = [];
      for (let i = 0; i < 5; i++) made.push(await create(route({ recipient: `page-${i}@example.net` })));
      const atNet = await everyListed(undefined, '&domain=EXAMPLE.NET.');
      expect(atNet.map((r) => r.recipient).filter((r) => r.startsWith('page-'))).to.deep.equal(made.map((r) => r.recipient));
      expect(atNet.every((r) => r.recipient.endsWith('@example.net'))).to.equal(true);
      expect((await api('GET', `${base}?domain=unknown.example`)).body.data).to.deep.equal([]);

      const all = await everyListed();
      expect(all.map((r) => r.id)).to.deep.equal([...all.map((r) => r.id)].sort());
      // Backwards from the end: the page just before the cursor.
      const last = await api('GET', `${base}?limit=2&domain=example.net&before=${encodeURIComponent(await cursorAt(made[4]!.id))}`);
      expect(last.status).to.equal(200);
      expect(last.body.data.map((r: ApiRoute) => r.id)).to.deep.equal([made[2]!.id, made[3]!.id]);
    });

    /** The cursor of a page whose first item is `id`, as the server hands it out. */
    async function cursorAt(id: string): Promise<string> {
      let after: string | undefined;
      for (;;) {
        const res = await api('GET', `${base}?limit=1&domain=example.net${after ? `&after=${after}` : ''}`);
        if (res.body.data[0]?.id === id) return res.body.pagination.previous_cursor;
        expect(res.body.pagination.has_more, 'the route is listed').to.equal(true);
        after = res.body.pagination.next_cursor;
      }
    }
  });

  describe('update and delete', () => {
    it('updates only the fields given; null and absent leave a field as it is', async () => {
      const created = await create(route({ name: 'before', attachments: true }));
      clock.advance(1000);
      const updated = await api('PUT', `${base}/${created.id}`, { body: { name: null, headers: true, enabled: false, strip_replies: null } });
      expect(updated.status).to.equal(200);
      expect(updated.body).to.include({
        name: 'before',
        url: created.url,
        recipient: created.recipient,
        attachments: true,
        headers: true,
        enabled: false,
        strip_replies: false,
      });
      expect(updated.body).to.not.have.property('secret');
      expect(updated.body.created_at).to.equal(created.created_at);
      expect(updated.body.updated_at).to.equal(new Date(clock.ms).toISOString());
      const noop = await api('PUT', `${base}/${created.id}`, { body: {} });
      expect(noop.status).to.equal(200);
      expect(noop.body).to.include({ name: 'before', headers: true, enabled: false });
      const renamed = await api('PUT', `${base}/${created.id}`, {
        body: { name: 'after', url: `https://${PUBLIC_IP}/other`, recipient: '*-Help@example.org', group_by_message_id: true, enabled: true },
      });
      expect(renamed.body).to.include({
        name: 'after',
        url: `https://${PUBLIC_IP}/other`,
        recipient: '*-help@example.org',
        group_by_message_id: true,
        enabled: true,
      });
      expect((await api('GET', `${base}/${created.id}`)).body).to.deep.equal(renamed.body);
      // It moved from one domain's listing to the other's.
      expect((await everyListed(undefined, '&domain=example.com')).map((r) => r.id)).to.not.include(created.id);
      expect((await everyListed(undefined, '&domain=example.org')).map((r) => r.id)).to.include(created.id);
    });

    it('refuses a bad pattern or another domain at update, leaving the route as it was', async () => {
      const created = await create(route());
      for (const [recipient, message] of [
        ['a*b*c@example.com', 'may have one * only'],
        ['x@not-ours.example', 'is not a domain of this account'],
        ['', 'is not valid'],
      ] as const) {
        const res = await api('PUT', `${base}/${created.id}`, { body: { recipient, name: 'changed' } });
        expect(res.status, recipient).to.equal(400);
        expect(res.body.message, recipient).to.include(message);
      }
      expect((await api('GET', `${base}/${created.id}`)).body).to.include({ recipient: created.recipient, name: created.name });
    });

    it('deletes a route, which is then not found', async () => {
      const created = await create(route({ name: 'doomed' }));
      const res = await api('DELETE', `${base}/${created.id}`);
      expect(res.status).to.equal(200);
      expect(res.body.message).to.equal(`route ${created.id} (doomed) deleted successfully`);
      for (const [method, body] of [
        ['GET', undefined],
        ['PUT', { name: 'x' }],
        ['DELETE', undefined],
      ] as const) {
        expect((await api(method, `${base}/${created.id}`, body ? { body } : {})).status, method).to.equal(404);
      }
      expect((await everyListed()).map((r) => r.id)).to.not.include(created.id);
      expect(await server.daemon.core.routes.target(created.id)).to.equal(undefined);
    });

    it('answers 404 for unknown ids and for routes of another account, 400 for malformed ids', async () => {
      for (const [method, body] of [
        ['GET', undefined],
        ['PUT', { name: 'x' }],
        ['DELETE', undefined],
      ] as const) {
        const res = await api(method, `${base}/${UNKNOWN_ID}`, body ? { body } : {});
        expect(res.status, method).to.equal(404);
        expect(res.body.message).to.equal('route not found');
        expect((await api(method, `${base}/not-a-uuid`, body ? { body } : {})).status, method).to.equal(400);
      }
      const core = server.daemon.core;
      const other = await core.accounts.create({ name: 'Other', website: 'https://other.example', ownerEmail: 'owner@other.example' });
      const key = (await core.apiKeys.create(other.id, { label: 'other', scopes: EVERY_GLOBAL_SCOPE })).secret;
      const otherBase = `/v2/accounts/${other.id}/routes`;
      expect((await api('POST', `/v2/accounts/${other.id}/domains`, { key, body: { domain: 'other.example' } })).status).to.equal(201);
      const theirs = await api('POST', otherBase, { key, body: route({ recipient: '*@other.example' }) });
      expect(theirs.status).to.equal(201);

      const mine = await create(route());
      for (const [method, body] of [
        ['GET', undefined],
        ['PUT', { enabled: false }],
        ['DELETE', undefined],
      ] as const) {
        expect((await api(method, `${otherBase}/${mine.id}`, { key, ...(body ? { body } : {}) })).status, `${method} mine with their key`).to.equal(404);
        expect((await api(method, `${base}/${theirs.body.id}`, body ? { body } : {})).status, `${method} theirs with my key`).to.equal(404);
      }
      expect((await api('GET', `${base}/${mine.id}`)).body.enabled).to.equal(true);
      expect((await api('GET', `${otherBase}/${theirs.body.id}`, { key })).body.enabled).to.equal(true);
      expect((await api('GET', otherBase, { key })).body.data.map((r: ApiRoute) => r.id)).to.deep.equal([theirs.body.id]);
      expect((await everyListed()).map((r) => r.id)).to.not.include(theirs.body.id);
      // Their domain is not ours to route, and our key does not reach their account.
      expect((await api('POST', base, { body: route({ recipient: 'x@other.example' }) })).status).to.equal(400);
      expect((await api('GET', otherBase)).status).to.be.oneOf([401, 403, 404]);
    });
  });

  describe('counters', () => {
    it('shows the delivery counters kept apart from the record, resets the run of errors on enable, forgets them on delete', async () => {
      const core = server.daemon.core;
      const created = await create(route());
      const at = (s: number) => new Date(Date.parse('2026-11-21T12:00:00Z') + s * 1000).toISOString();
      const ops = [];
      ops.push((await core.routeCounters.count(created.id, true, at(1))).op);
      for (let i = 2; i <= 4; i++) ops.push((await core.routeCounters.count(created.id, false, at(i))).op);
      await core.store.commit(ops);
      const read = await api('GET', `${base}/${created.id}`);
      expect(read.body).to.include({ success_count: 1, error_count: 3, errors_since_last_success: 3, last_request_at: at(4) });
      expect((await everyListed()).find((r) => r.id === created.id)).to.include({ success_count: 1, error_count: 3 });

      expect(await core.routes.disable(created.id)).to.equal(true);
      expect((await api('GET', `${base}/${created.id}`)).body).to.include({ enabled: false, errors_since_last_success: 3 });
      // A change that does not enable keeps the run.
      expect((await api('PUT', `${base}/${created.id}`, { body: { name: 'renamed' } })).body.errors_since_last_success).to.equal(3);
      const enabled = await api('PUT', `${base}/${created.id}`, { body: { enabled: true } });
      expect(enabled.body).to.include({ enabled: true, success_count: 1, error_count: 3, errors_since_last_success: 0, last_request_at: at(4) });

      expect((await api('DELETE', `${base}/${created.id}`)).status).to.equal(200);
      expect(await core.store.get('routeCounters', created.id)).to.equal(undefined);
    });
  });

  describe('target rules', () => {
    const refused: Array<[unknown, string]> = [
      ['not a url', 'url must not contain spaces or control characters'],
      ['example.com/hook', 'url must be an absolute http or https URL'],
      ['ftp://hooks.example.com/', 'url scheme ftp is not allowed; use http or https'],
      ['javascript:alert(1)', 'url scheme javascript is not allowed; use http or https'],
      ['http://10.1.2.3/hook', 'a private address'],
      ['http://192.168.0.10/hook', 'a private address'],
      ['http://127.0.0.1:8080/hook', 'a loopback address'],
      ['http://[::1]/hook', 'a loopback address'],
      ['http://[::ffff:127.0.0.1]/hook', 'a loopback address'],
      ['http://169.254.169.254/latest/meta-data/', 'a link-local address'],
      ['http://[fd00::1]/', 'a private (unique local) address'],
      ['http://localhost:3000/', 'a loopback name'],
      ['http://2130706433/hook', 'url host 127.0.0.1 is a loopback address'],
      ['http://rebind.example.com/hook', 'resolves to 127.0.0.1, a loopback address'],
      ['http://metadata.example.com/latest/meta-data/', 'resolves to 169.254.169.254, a link-local address'],
      ['https://user:pw@hooks.example.com/', 'must not contain a user name or password'],
      [`https://hooks.example.com/${'a'.repeat(2048)}`, 'url must be at most 2048 characters'],
      [42, 'url'],
    ];

    it('refuses bad, private, loopback and metadata URLs at create with 400 and a clear message, writing nothing', async () => {
      const before = (await everyListed()).length;
      for (const [url, message] of refused) {
        const res = await api('POST', base, { body: route({ url }) });
        expect(res.status, String(url)).to.equal(400);
        expect(res.body.message, String(url)).to.include(message);
      }
      expect((await everyListed()).length).to.equal(before);
    });

    it('refuses the same URLs at update, leaving the route as it was', async () => {
      const created = await create(route());
      for (const [url, message] of refused) {
        const res = await api('PUT', `${base}/${created.id}`, { body: { url, name: 'changed' } });
        expect(res.status, String(url)).to.equal(400);
        expect(res.body.message, String(url)).to.include(message);
      }
      expect((await api('GET', `${base}/${created.id}`)).body).to.include({ url: created.url, name: created.name });
    });

    it('accepts a public name and a public literal', async () => {
      expect((await create(route({ url: 'http://hooks.example.com:8443/a?b=c' }))).url).to.equal('http://hooks.example.com:8443/a?b=c');
      expect((await create(route({ url: `https://${PUBLIC_IP}/x` }))).url).to.equal(`https://${PUBLIC_IP}/x`);
    });

    itFollowsTargetUrlRules({ refused, body: route, create, api, base: () => base, dns: () => dns });
  });

  describe('bounded input', () => {
    it('refuses wrong types, over-long fields, unknown fields and nested junk with 400 naming them, never a 500', async () => {
      const deep = JSON.parse('{"a":'.repeat(200) + '1' + '}'.repeat(200)) as object;
      const cases: Array<[object, string]> = [
        [route({ name: 'n'.repeat(256) }), 'name must be at most 255 characters'],
        [route({ name: '  ' }), 'name must be 1 to 255 characters'],
        [route({ name: 'bad\u0007name' }), 'name must not contain control characters'],
        [route({ name: 7 }), 'name'],
        [route({ recipient: `${'a'.repeat(256)}@example.com` }), 'recipient must be at most 255 characters'],
        [route({ attachments: 'yes' }), 'attachments'],
        [route({ headers: 1 }), 'headers'],
        [route({ group_by_message_id: [] }), 'group_by_message_id'],
        [route({ strip_replies: {} }), 'strip_replies'],
        [route({ enabled: null }), 'enabled'],
        [route({ secret: 'aha-rsec-mine' }), 'secret'],
        [route({ extra: deep }), 'extra'],
        [route({ name: deep }), 'name'],
        [{ url: 'https://hooks.example.com/', recipient: 'a@example.com' }, 'name'],
      ];
      for (const [body, message] of cases) {
        const res = await api('POST', base, { body });
        expect(res.status, JSON.stringify(body).slice(0, 100)).to.equal(400);
        expect(res.body.message, JSON.stringify(body).slice(0, 100)).to.include(message);
      }
      for (const rawBody of ['{"name":', '[]', '"route"', 'null', '[['.repeat(5000) + ']]'.repeat(5000)]) {
        const res = await api('POST', base, { rawBody, headers: { 'content-type': 'application/json' } });
        expect(res.status, rawBody.slice(0, 20)).to.be.within(400, 499);
        expect(res.body.message, rawBody.slice(0, 20)).to.be.a('string');
      }

      const created = await create(route());
      for (const body of [
        { name: 'n'.repeat(256) },
        { secret: 'x' },
        { enabled: 'no' },
        { recipient: 5 },
        { url: ['https://hooks.example.com/'] },
        { headers: deep },
      ]) {
        const res = await api('PUT', `${base}/${created.id}`, { body });
        expect(res.status, JSON.stringify(body).slice(0, 100)).to.equal(400);
        expect(res.body.message).to.be.a('string');
      }
      expect((await api('PUT', `${base}/${created.id}`, { rawBody: '{"name":', headers: { 'content-type': 'application/json' } })).status).to.equal(400);
      const unchanged = await api('GET', `${base}/${created.id}`);
      expect(unchanged.body).to.include({ name: created.name, recipient: created.recipient, enabled: true, headers: false });

      for (const query of ['domain=' + 'x'.repeat(300), 'limit=0', 'limit=abc', 'after=not-a-cursor']) {
        const res = await api('GET', `${base}?${query}`);
        expect(res.status, query).to.equal(400);
      }
    });
  });

  describe('scopes', () => {
    let routes: { com: ApiRoute; org: ApiRoute };
    let comKey: string;

    before(async () => {
      routes = {
        com: await create(route({ name: 'scope-com', recipient: 'scope@example.com' })),
        org: await create(route({ name: 'scope-org', recipient: 'scope@example.org' })),
      };
      comKey = await keyWith(['routes:read:{example.com}', 'routes:write:{example.com}', 'routes:delete:{example.com}']);
    });

    it('lists for a domain-scoped key only with domain, and only its domains', async () => {
      const bare = await api('GET', base, { key: comKey });
      expect(bare.status).to.equal(400);
      expect(bare.body.message).to.equal('domain is required when listing routes with a domain-scoped API key');
      const seen = await everyListed(comKey, '&domain=Example.com');
      expect(seen.map((r) => r.name)).to.include('scope-com');
      expect(seen.every((r) => r.recipient.endsWith('@example.com'))).to.equal(true);
      const other = await api('GET', `${base}?domain=example.org`, { key: comKey });
      expect(other.status).to.equal(403);
      expect(other.body.message).to.include('permissions');
      // An all-domains key lists with or without domain.
      const all = await keyWith(['routes:read:all']);
      expect((await everyListed(all)).map((r) => r.name)).to.include.members(['scope-com', 'scope-org']);
      expect((await everyListed(all, '&domain=example.org')).map((r) => r.name)).to.include('scope-org');
    });

    it('reads, updates and deletes only routes at its domains', async () => {
      expect((await api('GET', `${base}/${routes.com.id}`, { key: comKey })).status).to.equal(200);
      expect((await api('PUT', `${base}/${routes.com.id}`, { key: comKey, body: { headers: true } })).status).to.equal(200);
      const read = await api('GET', `${base}/${routes.org.id}`, { key: comKey });
      expect(read.status).to.equal(403);
      expect(read.body.message).to.equal('this API key may not read routes of example.org');
      const put = await api('PUT', `${base}/${routes.org.id}`, { key: comKey, body: { headers: true } });
      expect(put.status).to.equal(403);
      expect(put.body.message).to.equal('this API key may not update routes of example.org');
      const del = await api('DELETE', `${base}/${routes.org.id}`, { key: comKey });
      expect(del.status).to.equal(403);
      expect(del.body.message).to.equal('this API key may not delete routes of example.org');
      expect((await api('GET', `${base}/${routes.org.id}`)).body.headers).to.equal(false);
    });

    it('creates only at its domains, and moves a route only between domains it holds (old and new)', async () => {
      expect((await api('POST', base, { key: comKey, body: route({ recipient: '*@example.com' }) })).status).to.equal(201);
      const elsewhere = await api('POST', base, { key: comKey, body: route({ recipient: '*@example.org' }) });
      expect(elsewhere.status).to.equal(403);
      expect(elsewhere.body.message).to.equal('this API key may not create routes of example.org');
      const moveOut = await api('PUT', `${base}/${routes.com.id}`, { key: comKey, body: { recipient: 'moved@example.org' } });
      expect(moveOut.status).to.equal(403);
      expect(moveOut.body.message).to.equal('this API key may not move routes to example.org');
      const moveIn = await api('PUT', `${base}/${routes.org.id}`, { key: comKey, body: { recipient: 'moved@example.com' } });
      expect(moveIn.status).to.equal(403);
      expect((await api('GET', `${base}/${routes.com.id}`)).body.recipient).to.equal('scope@example.com');
      expect((await api('GET', `${base}/${routes.org.id}`)).body.recipient).to.equal('scope@example.org');
      const both = await keyWith(['routes:write:{example.com}', 'routes:write:{example.org}']);
      const moved = await api('PUT', `${base}/${routes.com.id}`, { key: both, body: { recipient: 'scope-moved@example.org' } });
      expect(moved.status).to.equal(200);
      expect(moved.body.recipient).to.equal('scope-moved@example.org');
    });

    it('asks each operation for its own verb, and refuses keys without any routes scope', async () => {
      const reader = await keyWith(['routes:read:all']);
      expect((await api('POST', base, { key: reader, body: route() })).status).to.equal(403);
      expect((await api('PUT', `${base}/${routes.org.id}`, { key: reader, body: { headers: true } })).status).to.equal(403);
      expect((await api('DELETE', `${base}/${routes.org.id}`, { key: reader })).status).to.equal(403);
      const writer = await keyWith(['routes:write:all']);
      expect((await api('GET', `${base}/${routes.org.id}`, { key: writer })).status).to.equal(403);
      expect((await api('DELETE', `${base}/${routes.org.id}`, { key: writer })).status).to.equal(403);
      const stranger = await keyWith(['domains:read', 'webhooks:read:all']);
      expect((await api('GET', base, { key: stranger })).status).to.equal(403);
      expect((await api('GET', `${base}?domain=example.com`, { key: stranger })).status).to.equal(403);
      expect((await api('POST', base, { key: stranger, body: route() })).status).to.equal(403);
      const deleter = await keyWith(['routes:delete:all']);
      expect((await api('DELETE', `${base}/${routes.org.id}`, { key: deleter })).status).to.equal(200);
    });
  });

  describe('idempotent create', () => {
    it('replays the 201 with the same secret to the same key, and shows it to no other key', async () => {
      const headers = { 'idempotency-key': 'route-create-1' };
      const body = route({ name: 'idem' });
      const first = await api('POST', base, { body, headers });
      expect(first.status).to.equal(201);
      expect(first.headers.get('idempotent-replayed')).to.equal(null);
      const again = await api('POST', base, { body, headers });
      expect(again.status).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      expect((await everyListed()).filter((r) => r.name === 'idem')).to.have.length(1);

      const other = await keyWith(EVERY_GLOBAL_SCOPE);
      const stolen = await api('POST', base, { key: other, body, headers });
      expect(stolen.status).to.equal(422);
      expect(JSON.stringify(stolen.body)).to.not.include(first.body.secret);
      const changed = await api('POST', base, { body: { ...body, name: 'idem 2' }, headers });
      expect(changed.status).to.equal(422);
    });

    it('replays a refusal as it was, creating nothing', async () => {
      const headers = { 'idempotency-key': 'route-create-refused' };
      const body = route({ recipient: 'x@not-ours.example' });
      const first = await api('POST', base, { body, headers });
      expect(first.status).to.equal(400);
      const again = await api('POST', base, { body, headers });
      expect(again.status).to.equal(400);
      expect(again.body).to.deep.equal(first.body);
    });
  });

  describe('at rest and for the inbound side', () => {
    it('never stores a secret in clear, keeps routes across a restart, and finds them by domain', async () => {
      const created = await create(route({ name: 'durable', recipient: 'durable-*@example.com' }));
      const disabled = await create(route({ name: 'durable-off', recipient: 'off@example.com', enabled: false }));
      const idem = await api('POST', base, { body: route({ name: 'durable-idem' }), headers: { 'idempotency-key': 'at-rest-1' } });
      expect(idem.status).to.equal(201);
      const { accountId, adminKey } = server;
      await server.daemon.stop();
      expect(await storeContains(server, created.secret!)).to.equal(false);
      expect(await storeContains(server, idem.body.secret)).to.equal(false);
      expect(await storeContains(server, 'aha-rsec-')).to.equal(false);
      server = { ...(await server.restart()), accountId, adminKey };

      const read = await api('GET', `${base}/${created.id}`);
      expect(read.status).to.equal(200);
      expect(read.body.recipient).to.equal('durable-*@example.com');
      const routes = server.daemon.core.routes;
      const record = await routes.target(created.id);
      expect(routes.secretOf(record!)).to.equal(created.secret);

      // What the inbound MX asks for each recipient: the account's routes at the domain.
      const atDomain = await routes.routesAt(accountId, 'example.com');
      const ids = atDomain.map((r) => r.id);
      expect(ids).to.include.members([created.id, disabled.id]);
      expect(atDomain.every((r) => r.recipient.endsWith('@example.com'))).to.equal(true);
      const wanted = (address: string) => atDomain.filter((r) => r.enabled && matches(r.recipient, address)).map((r) => r.id);
      expect(wanted('Durable-42@Example.com')).to.include(created.id);
      expect(wanted('off@example.com')).to.not.include(disabled.id);
      expect(wanted('durable@example.com')).to.not.include(created.id);
      expect(await routes.routesAt(accountId, 'not-ours.example')).to.deep.equal([]);
    });
  });
});

describe('Routes resource: limits and webhooks.allow_networks', () => {
  let server: TestServer;
  let dns: TestDnsServer;
  let base: string;

  before(async () => {
    dns = await startDnsServer();
    dns.zone.set('receiver.test', 'A', ['127.0.0.1']);
    server = await startServer({
      config: { dns: { servers: [dns.address], timeout_ms: 1000, tries: 1 }, webhooks: { allow_networks: ['127.0.0.0/8', '10.20.0.0/16'] } },
    });
    base = `/v2/accounts/${server.accountId}/routes`;
    expect((await call(server, 'POST', `/v2/accounts/${server.accountId}/domains`, { body: { domain: 'example.com' } })).status).to.equal(201);
  });
  after(async () => {
    await server.stop();
    await dns.close();
  });

  it('accepts targets inside an allowed network, by literal or by name, and still refuses the rest', async () => {
    const created: string[] = [];
    for (const url of ['http://127.0.0.1:9000/in', 'http://receiver.test:9000/in', 'http://10.20.3.4/in']) {
      const res = await call(server, 'POST', base, { body: { name: 'lan', url, recipient: '*@example.com' } });
      expect(res.status, `${url} ${JSON.stringify(res.body)}`).to.equal(201);
      created.push(res.body.id);
    }
    for (const url of ['http://10.21.0.1/in', 'http://[::1]/in', 'http://169.254.169.254/']) {
      expect((await call(server, 'POST', base, { body: { name: 'lan', url, recipient: '*@example.com' } })).status, url).to.equal(400);
      expect((await call(server, 'PUT', `${base}/${created[0]}`, { body: { url } })).status, url).to.equal(400);
    }
    for (const id of created) expect((await call(server, 'DELETE', `${base}/${id}`)).status).to.equal(200);
  });

  it(`allows at most ${MAX_ROUTES_PER_ACCOUNT} routes per account (409), and one more once one is deleted`, async function () {
    this.timeout(120_000);
    const routes = server.daemon.core.routes;
    const options = { attachments: false, headers: false, groupByMessageId: false, stripReplies: false, enabled: true };
    let last = '';
    for (let i = 0; i < MAX_ROUTES_PER_ACCOUNT; i++) {
      last = (await routes.create(server.accountId, { name: `r${i}`, url: 'http://127.0.0.1:9000/in', recipient: `r${i}@example.com`, ...options })).route.id;
    }
    const over = await call(server, 'POST', base, { body: { name: 'one too many', url: 'http://127.0.0.1:9000/in', recipient: 'over@example.com' } });
    expect(over.status).to.equal(409);
    expect(over.body.message).to.equal(`an account may have at most ${MAX_ROUTES_PER_ACCOUNT} routes`);
    expect((await call(server, 'DELETE', `${base}/${last}`)).status).to.equal(200);
    expect(
      (await call(server, 'POST', base, { body: { name: 'fits again', url: 'http://127.0.0.1:9000/in', recipient: 'over@example.com' } })).status,
    ).to.equal(201);
  });
});
