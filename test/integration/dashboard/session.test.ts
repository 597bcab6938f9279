import { expect } from 'chai';
import { call, ManualClock, startServer, type TestServer } from '../../helpers/harness.ts';
import { cookieOf, signIn, ui } from './helpers.ts';

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

describe('dashboard sessions over HTTP', () => {
  let server: TestServer;
  const clock = new ManualClock(Date.now());

  /** A new v2 key of the bootstrap account with these scopes (and allow list). */
  async function newKey(scopes: string[], ipAllowList?: string[]): Promise<{ id: string; secret: string }> {
    const created = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, {
      body: { label: 'ui', scopes, ...(ipAllowList ? { ip_allow_list: ipAllowList } : {}) },
    });
    expect(created.status).to.equal(201);
    return { id: created.body.id as string, secret: created.body.secret_key as string };
  }

  before(async () => {
    server = await startServer({
      clock,
      config: {
        // Many refusals are on purpose here; the limiter has its own test.
        api: { auth_failures: { burst: 1000 }, trusted_proxies: ['127.0.0.1/32'] },
        dashboard: { session_ttl_minutes: 60 },
      },
    });
  });
  after(async () => {
    await server.stop();
  });

  describe('signing in with an API key', () => {
    it('answers 201 with the session and an HttpOnly, SameSite=Strict cookie for /ui', async () => {
      const res = await ui(server, 'POST', '/ui/session', { body: { api_key: server.adminKey } });
      expect(res.status).to.equal(201);
      expect(res.body).to.include({ kind: 'account', account_id: server.accountId });
      expect(res.body.key_id).to.be.a('string');
      expect(res.body.account_name).to.be.a('string');
      expect(res.body.scopes).to.be.an('array').that.is.not.empty;
      expect(res.body.csrf_token).to.match(/^[A-Za-z0-9_-]{43}$/);
      expect(Date.parse(res.body.expires_at)).to.equal(clock.now() + 60 * 60_000);
      const setCookie = res.headers.get('set-cookie')!;
      expect(setCookie).to.match(/^postilion_session=[A-Za-z0-9_-]{43}; Path=\/ui; HttpOnly; SameSite=Strict; Max-Age=3600$/);
      expect(res.headers.get('cache-control')).to.equal('no-store');
    });

    it('marks the cookie Secure when a trusted proxy says the client spoke HTTPS', async () => {
      const { setCookie } = await signIn(server, server.adminKey, { 'x-forwarded-proto': 'https' });
      expect(setCookie).to.match(/; Secure$/);
    });

    it('refuses an unknown key, a malformed one and a v1 key with 401', async () => {
      const unknown = await ui(server, 'POST', '/ui/session', { body: { api_key: `aha-sk-${'A'.repeat(64)}` } });
      expect(unknown.status).to.equal(401);
      expect(unknown.body).to.deep.equal({ message: 'Invalid API key' });
      expect(unknown.headers.get('set-cookie')).to.equal(null);
      const malformed = await ui(server, 'POST', '/ui/session', { body: { api_key: 'hello' } });
      expect(malformed.status).to.equal(401);
      const { core } = server.daemon;
      const v1 = await core.apiKeys.create(server.accountId, { label: 'v1', scopes: ['accounts:read'], kind: 'v1' });
      const legacy = await ui(server, 'POST', '/ui/session', { body: { api_key: v1.secret } });
      expect(legacy.status).to.equal(401);
      expect(legacy.body.message).to.equal('Invalid API key');
    });

    it("refuses a suspended account's key with 401 and a key used outside its allow list with 403", async () => {
      const { core } = server.daemon;
      const other = await core.accounts.create({ name: 'S', website: 'https://s.example', ownerEmail: 'o@s.example' });
      const { secret } = await core.apiKeys.create(other.id, { label: 's', scopes: ['accounts:read'] });
      await core.store.commit([{ type: 'put', family: 'accounts', key: other.id, value: { ...other, status: 'suspended' } }]);
      const suspended = await ui(server, 'POST', '/ui/session', { body: { api_key: secret } });
      expect(suspended.status).to.equal(401);
      expect(suspended.body.message).to.equal('Account is suspended');
      const fenced = await newKey(['accounts:read'], ['192.0.2.0/24']);
      const outside = await ui(server, 'POST', '/ui/session', { body: { api_key: fenced.secret } });
      expect(outside.status).to.equal(403);
      expect(outside.body.message).to.contain('ip_allow_list');
    });

    it('answers malformed sign-ins with 4xx, never 500', async () => {
      const cases: Array<[string | undefined, string, number]> = [
        ['application/json', '{', 400],
        ['application/json', '[]', 400],
        ['application/json', 'null', 400],
        ['application/json', '{"api_key": 5}', 400],
        ['application/json', '{}', 400],
        ['application/json', JSON.stringify({ api_key: 'x'.repeat(600) }), 400],
        ['application/json', JSON.stringify({ api_key: 'x'.repeat(5000) }), 413],
        ['text/plain', JSON.stringify({ api_key: server.adminKey }), 415],
        ['application/x-www-form-urlencoded', `api_key=${server.adminKey}`, 415],
      ];
      for (const [type, rawBody, status] of cases) {
        const res = await ui(server, 'POST', '/ui/session', { rawBody, headers: type ? { 'content-type': type } : {} });
        expect(res.status, `${type} ${rawBody.slice(0, 40)}`).to.equal(status);
        expect(res.body.message).to.be.a('string');
      }
    });
  });

  describe('the session', () => {
    it('is read back by GET /ui/session, and 401 without a cookie or with an unknown one', async () => {
      const session = await signIn(server, server.adminKey);
      const read = await ui(server, 'GET', '/ui/session', { cookie: session.cookie });
      expect(read.status).to.equal(200);
      expect(read.body).to.deep.equal(session.info);
      expect((await ui(server, 'GET', '/ui/session')).status).to.equal(401);
      const unknown = await ui(server, 'GET', '/ui/session', { cookie: 'A'.repeat(43) });
      expect(unknown.status).to.equal(401);
      expect(unknown.body).to.deep.equal({ message: 'not signed in' });
      expect((await ui(server, 'GET', '/ui/session', { cookie: 'not a token;' })).status).to.equal(401);
    });

    it('is revoked by DELETE /ui/session with its CSRF token, which clears the cookie', async () => {
      const session = await signIn(server, server.adminKey);
      const refused = await ui(server, 'DELETE', '/ui/session', { cookie: session.cookie });
      expect(refused.status).to.equal(403);
      expect(refused.body).to.deep.equal({ message: 'missing or wrong X-CSRF-Token' });
      const out = await ui(server, 'DELETE', '/ui/session', { cookie: session.cookie, csrf: session.csrf });
      expect(out.status).to.equal(204);
      expect(out.headers.get('set-cookie')).to.match(/^postilion_session=; Path=\/ui; HttpOnly; SameSite=Strict; Max-Age=0/);
      expect((await ui(server, 'GET', '/ui/session', { cookie: session.cookie })).status).to.equal(401);
      expect((await ui(server, 'GET', `/ui/api/v2/accounts/${server.accountId}/api-keys`, { cookie: session.cookie, csrf: session.csrf })).status).to.equal(
        401,
      );
    });

    it('ends when it expires', async () => {
      const session = await signIn(server, server.adminKey);
      clock.advance(59 * 60_000);
      expect((await ui(server, 'GET', '/ui/session', { cookie: session.cookie })).status).to.equal(200);
      clock.advance(61_000);
      expect((await ui(server, 'GET', '/ui/session', { cookie: session.cookie })).status).to.equal(401);
      expect((await ui(server, 'GET', `/ui/api/v2/accounts/${server.accountId}/api-keys`, { cookie: session.cookie, csrf: session.csrf })).status).to.equal(
        401,
      );
    });

    it('is refused at once when its key is deleted', async () => {
      const key = await newKey(['api-keys:read']);
      const session = await signIn(server, key.secret);
      const path = `/ui/api/v2/accounts/${server.accountId}/api-keys`;
      expect((await ui(server, 'GET', path, { cookie: session.cookie, csrf: session.csrf })).status).to.equal(200);
      expect((await call(server, 'DELETE', `/v2/accounts/${server.accountId}/api-keys/${key.id}`)).status).to.equal(200);
      const after = await ui(server, 'GET', path, { cookie: session.cookie, csrf: session.csrf });
      expect(after.status).to.equal(401);
      expect((await ui(server, 'GET', '/ui/session', { cookie: session.cookie })).status).to.equal(401);
    });

    it('stores only the hashes of its tokens', async () => {
      const session = await signIn(server, server.adminKey);
      const rows = await server.daemon.core.store.families.dashboardSessions.iterator({}).all();
      const stored = JSON.stringify(rows);
      expect(stored).to.not.contain(session.cookie);
      expect(stored).to.contain(session.csrf);
    });
  });

  describe('the /ui/api/v2 mirror', () => {
    it('answers a v2 operation with the session and its CSRF token, as the API does', async () => {
      const session = await signIn(server, server.adminKey);
      const path = `/accounts/${server.accountId}/api-keys`;
      const viaUi = await ui(server, 'GET', `/ui/api/v2${path}`, { cookie: session.cookie, csrf: session.csrf });
      const viaApi = await call(server, 'GET', `/v2${path}`);
      expect(viaUi.status).to.equal(200);
      expect(viaUi.body.data.map((k: { id: string }) => k.id)).to.deep.equal(viaApi.body.data.map((k: { id: string }) => k.id));
      expect(viaUi.headers.get('content-security-policy')).to.equal(CSP);
    });

    it('refuses a request without the CSRF token, or with a wrong one, with 403', async () => {
      const session = await signIn(server, server.adminKey);
      const path = `/ui/api/v2/accounts/${server.accountId}/api-keys`;
      const none = await ui(server, 'GET', path, { cookie: session.cookie });
      expect(none.status).to.equal(403);
      expect(none.body).to.deep.equal({ message: 'missing or wrong X-CSRF-Token' });
      const other = await signIn(server, server.adminKey);
      expect((await ui(server, 'GET', path, { cookie: session.cookie, csrf: other.csrf })).status).to.equal(403);
      expect((await ui(server, 'POST', path, { cookie: session.cookie, csrf: 'x', body: { label: 'l', scopes: ['accounts:read'] } })).status).to.equal(403);
      expect((await ui(server, 'GET', path, { csrf: session.csrf })).status).to.equal(401);
    });

    it('refuses a state change from another origin with 403, and takes one from its own', async () => {
      const session = await signIn(server, server.adminKey);
      const path = `/ui/api/v2/accounts/${server.accountId}/api-keys`;
      const body = { label: 'from-ui', scopes: ['accounts:read'] };
      const foreign = await ui(server, 'POST', path, { cookie: session.cookie, csrf: session.csrf, body, headers: { origin: 'https://evil.example' } });
      expect(foreign.status).to.equal(403);
      expect(foreign.body.message).to.contain('Origin');
      const signInForeign = await ui(server, 'POST', '/ui/session', { body: { api_key: server.adminKey }, headers: { origin: 'https://evil.example' } });
      expect(signInForeign.status).to.equal(403);
      const own = await ui(server, 'POST', path, { cookie: session.cookie, csrf: session.csrf, body, headers: { origin: server.url } });
      expect(own.status).to.equal(201);
      expect(own.body.secret_key).to.match(/^aha-sk-/);
    });

    it("never reaches another account's data", async () => {
      const { core } = server.daemon;
      const other = await core.accounts.create({ name: 'B', website: 'https://b.example', ownerEmail: 'o@b.example' });
      const session = await signIn(server, server.adminKey);
      const res = await ui(server, 'GET', `/ui/api/v2/accounts/${other.id}/api-keys`, { cookie: session.cookie, csrf: session.csrf });
      expect(res.status).to.equal(401);
      expect(res.body.message).to.equal('API key does not belong to this account');
    });

    it("enforces the key's scopes", async () => {
      const key = await newKey(['domains:read']);
      const session = await signIn(server, key.secret);
      expect(session.info.scopes).to.deep.equal(['domains:read']);
      const res = await ui(server, 'GET', `/ui/api/v2/accounts/${server.accountId}/messages`, { cookie: session.cookie, csrf: session.csrf });
      expect(res.status).to.equal(403);
      expect(res.body.message).to.equal('Insufficient permissions for the required scope');
      expect((await ui(server, 'GET', `/ui/api/v2/accounts/${server.accountId}/domains`, { cookie: session.cookie, csrf: session.csrf })).status).to.equal(200);
    });

    it('answers malformed bodies with 400', async () => {
      const session = await signIn(server, server.adminKey);
      const res = await ui(server, 'POST', `/ui/api/v2/accounts/${server.accountId}/api-keys`, {
        cookie: session.cookie,
        csrf: session.csrf,
        rawBody: '{"label":',
        headers: { 'content-type': 'application/json' },
      });
      expect(res.status).to.equal(400);
      expect(res.body.message).to.be.a('string');
    });
  });

  describe('the operator', () => {
    it('signs in once with a one-time link; a used, unknown or malformed token is refused with 401', async () => {
      const sessions = server.daemon.parts.api.dashboardSessions;
      const token = await sessions.createLoginLink();
      const first = await ui(server, 'POST', '/ui/session/operator', { body: { token } });
      expect(first.status).to.equal(201);
      expect(first.body).to.include({ kind: 'operator', account_id: null, account_name: null, key_id: null });
      expect(first.body.scopes).to.deep.equal([]);
      const again = await ui(server, 'POST', '/ui/session/operator', { body: { token } });
      expect(again.status).to.equal(401);
      expect(again.body).to.deep.equal({ message: 'this sign-in link is not valid (used, expired or unknown)' });
      expect((await ui(server, 'POST', '/ui/session/operator', { body: { token: 'A'.repeat(43) } })).status).to.equal(401);
      expect((await ui(server, 'POST', '/ui/session/operator', { body: { token: '../x' } })).status).to.equal(401);
      const cookie = cookieOf(first.headers.get('set-cookie'));
      expect((await ui(server, 'GET', '/ui/session', { cookie })).body.kind).to.equal('operator');
      const mirror = await ui(server, 'GET', `/ui/api/v2/accounts/${server.accountId}/api-keys`, { cookie, csrf: first.body.csrf_token });
      expect(mirror.status).to.equal(403);
    });

    it('cannot use a link after it expired, nor take one twice at the same time', async () => {
      const sessions = server.daemon.parts.api.dashboardSessions;
      const token = await sessions.createLoginLink(60_000);
      clock.advance(61_000);
      expect((await ui(server, 'POST', '/ui/session/operator', { body: { token } })).status).to.equal(401);
      const raced = await sessions.createLoginLink();
      const both = await Promise.all([1, 2, 3].map(() => ui(server, 'POST', '/ui/session/operator', { body: { token: raced } })));
      expect(both.map((r) => r.status).sort()).to.deep.equal([201, 401, 401]);
    });
  });

  describe('pages and files', () => {
    it('redirects /ui to /ui/ and serves the page and its files with the security headers', async () => {
      const bare = await ui(server, 'GET', '/ui');
      expect(bare.status).to.equal(301);
      expect(bare.headers.get('location')).to.equal('/ui/');
      const page = await ui(server, 'GET', '/ui/');
      expect(page.status).to.equal(200);
      expect(page.headers.get('content-type')).to.match(/^text\/html/);
      expect(page.text).to.contain('assets/app.js');
      for (const [path, type] of [
        ['/ui/assets/app.js', /^text\/javascript/],
        ['/ui/assets/app.css', /^text\/css/],
      ] as const) {
        const res = await ui(server, 'GET', path);
        expect(res.status, path).to.equal(200);
        expect(res.headers.get('content-type')).to.match(type);
      }
      for (const res of [bare, page]) {
        expect(res.headers.get('content-security-policy')).to.equal(CSP);
        expect(res.headers.get('x-frame-options')).to.equal('DENY');
        expect(res.headers.get('x-content-type-options')).to.equal('nosniff');
        expect(res.headers.get('referrer-policy')).to.equal('no-referrer');
        expect(res.headers.get('cross-origin-opener-policy')).to.equal('same-origin');
        expect(res.headers.get('cross-origin-resource-policy')).to.equal('same-origin');
      }
    });

    it('answers unknown paths with 404 and other methods with 405, with the headers and {message}', async () => {
      for (const path of [
        '/ui/nothing',
        '/ui/assets/other.js',
        '/ui/api/nothing',
        '/ui/api/v2/nothing',
        '/ui/api/dashboard/accounts/x/y',
        '/ui/api/operator/queue',
      ]) {
        const res = await ui(server, 'GET', path);
        expect(res.status, path).to.equal(404);
        expect(res.body, path).to.deep.equal({ message: 'not found' });
        expect(res.headers.get('content-security-policy'), path).to.equal(CSP);
      }
      for (const [method, path] of [
        ['POST', '/ui/'],
        ['PUT', '/ui/session'],
        ['GET', '/ui/session/operator'],
        ['DELETE', '/ui/assets/app.js'],
      ]) {
        const res = await ui(server, method!, path!);
        expect(res.status, `${method} ${path}`).to.equal(405);
        expect(res.body.message).to.equal('method not allowed');
        expect(res.headers.get('allow')).to.be.a('string');
      }
    });
  });

  describe('malformed requests', () => {
    it('answers every mix of method, path, body, cookie, CSRF token and Origin with a 4xx {message} (or the page), never 5xx, always with the headers', async () => {
      const session = await signIn(server, server.adminKey);
      const A = server.accountId;
      // (fetch resolves dot segments, %2e%2e included: those never reach the server from here.)
      const paths = [
        '/ui',
        '/ui/',
        '/UI/',
        '/ui/assets/app.js',
        '/ui/assets/..%2f..%2fpackage.json',
        '/ui/assets/app.js%00.css',
        '/ui/session',
        '/UI/SESSION',
        '/ui/session/operator',
        '/ui/session//operator',
        `/ui/api/v2/accounts/${A}/messages`,
        `/ui/api/v2/accounts/${A}/messages/%ff`,
        `/ui/api/v2/accounts/${A}/domains/..%2f..%2f`,
        '/ui/api/v2/accounts/not-a-uuid/messages',
        `/ui/api/dashboard/accounts/${A}/messages/%00/activity`,
        `/ui/api/dashboard/accounts/${A}/webhooks/not-a-uuid/deliveries`,
        `/ui/api/dashboard/accounts/${A}/domains/${'x'.repeat(300)}/dkim`,
        '/ui/api/operator/queue/status',
        '/ui/api/operator/queue/messages?limit=abc',
      ];
      const bodies: [string | undefined, string | undefined][] = [
        [undefined, undefined],
        ['application/json', '{'],
        ['application/json', 'null'],
        ['application/json', '[]'],
        ['application/json', '{"api_key":1,"token":{}}'],
        ['application/json', `{"token":"${'A'.repeat(43)}"}`],
        ['application/json', 'x'.repeat(5000)],
        ['application/json', `{"a":${'['.repeat(1000)}${']'.repeat(1000)}}`],
        ['text/plain', '{"api_key":"x"}'],
        ['application/x-www-form-urlencoded', 'api_key=x'],
      ];
      const cookies = [session.cookie, 'A'.repeat(43), 'x'.repeat(3000), '%ff', `${session.cookie}; postilion_session=${'B'.repeat(43)}`];
      const csrfs = [session.csrf, undefined, 'x', `${session.csrf}, ${session.csrf}`];
      const origins = [undefined, 'null', 'http://elsewhere.example', server.url.replace('http:', 'https:')];
      const methods = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'];
      let seed = 36;
      const pick = <T>(list: readonly T[]): T => list[(seed = (seed * 1103515245 + 12345) % 2147483648) % list.length]!;
      for (let i = 0; i < 300; i++) {
        const method = pick(methods);
        const path = pick(paths);
        const [type, body] = pick(bodies);
        const headers: Record<string, string> = { cookie: `postilion_session=${pick(cookies)}` };
        const csrf = pick(csrfs);
        if (csrf !== undefined) headers['x-csrf-token'] = csrf;
        const origin = pick(origins);
        if (origin !== undefined) headers.origin = origin;
        if (type !== undefined) headers['content-type'] = type;
        const sent = method === 'GET' || method === 'HEAD' ? undefined : body;
        const res = await ui(server, method, path, { headers, ...(sent !== undefined ? { rawBody: sent } : {}) });
        const what = `${method} ${path} ${JSON.stringify(headers).slice(0, 200)} ${sent?.slice(0, 40)} -> ${res.status} ${res.text.slice(0, 100)}`;
        expect(res.status, what).to.be.lessThan(500);
        expect(res.headers.get('content-security-policy'), what).to.equal(CSP);
        expect(res.text, what).not.to.contain('"name": "postilion"');
        if (res.status >= 400 && method !== 'HEAD') expect(res.body?.message, what).to.be.a('string');
        if (origin !== undefined && method !== 'GET' && method !== 'HEAD') expect(res.status, what).to.be.within(400, 499);
      }
    });
  });

  // Last: it counts the sign-ins of the tests above.
  describe('metrics', () => {
    it('counts sign-ins by kind and result in postilion_dashboard_sign_ins_total', async () => {
      const text = await server.daemon.metrics.registry.metrics();
      const count = (labels: string) => Number(new RegExp(`^postilion_dashboard_sign_ins_total\\{${labels}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      expect(count('kind="api_key",result="ok"')).to.be.greaterThan(5);
      expect(count('kind="api_key",result="refused"')).to.be.greaterThan(2);
      expect(count('kind="operator",result="ok"')).to.equal(2);
      expect(count('kind="operator",result="refused"')).to.equal(6);
    });
  });
});

describe('dashboard sign-ins and the account rate', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ config: { api: { rate_limits: { general: { per_second: 0.001, burst: 3 } } } } });
  });
  after(async () => {
    await server.stop();
  });

  it('takes one request of the account rate per sign-in: a valid key cannot store sessions faster than it may call the API', async () => {
    for (let i = 0; i < 3; i++) await signIn(server, server.adminKey);
    const res = await ui(server, 'POST', '/ui/session', { body: { api_key: server.adminKey } });
    expect(res.status).to.equal(429);
    expect(res.body).to.deep.equal({ message: 'Too many requests, rate limited.' });
    expect(res.headers.get('retry-after')).to.be.a('string');
    expect(res.headers.get('set-cookie')).to.equal(null);
    expect(res.headers.get('content-security-policy')).to.equal(CSP);
  });
});
