import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import Koa from 'koa';
import { errorResponses } from '../../../src/api/middleware/errors.ts';
import { requestContext, transport } from '../../../src/api/middleware/request-context.ts';
import { RateLimiter, RefusalLimiter } from '../../../src/api/middleware/rate-limit.ts';
import { dashboardHooks, type DashboardDeps } from '../../../src/dashboard/app.ts';
import { defaultAssetsDir } from '../../../src/dashboard/assets.ts';
import type { DashboardContext, DashboardRoute } from '../../../src/dashboard/contract.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { cookieOf, signIn, ui } from './helpers.ts';

/** Dashboard routes of both areas, answering what the mount let through. */
const ROUTES: DashboardRoute[] = [
  {
    area: 'dashboard',
    method: 'GET',
    path: '/accounts/:account_id/probe',
    security: [['messages:read:all'], ['messages:read:{domain}']],
    handler: async (ctx: DashboardContext) => {
      ctx.body = { account: ctx.params.account_id, key: ctx.state.auth!.key.id, session: ctx.state.dashboard!.session.kind };
    },
  },
  {
    area: 'dashboard',
    method: 'POST',
    path: '/accounts/:account_id/probe',
    security: [['messages:read:all'], ['messages:read:{domain}']],
    writes: true,
    handler: async (ctx: DashboardContext) => {
      ctx.status = 202;
      ctx.body = { bytes: ctx.state.rawBody.length };
    },
  },
  {
    area: 'operator',
    method: 'GET',
    path: '/probe',
    handler: async (ctx: DashboardContext) => {
      ctx.body = { operator: ctx.state.dashboard!.session.kind };
    },
  },
];

describe("dashboard routes (activity.ts, operator.ts) behind the mount's checks", () => {
  let server: TestServer;
  let listener: ReturnType<Koa['listen']>;
  let url: string;
  let deps: DashboardDeps;
  let storageOk = true;

  before(async () => {
    server = await startServer();
    const { core } = server.daemon;
    deps = {
      sessions: server.daemon.parts.api.dashboardSessions,
      apiKeys: core.apiKeys,
      accounts: core.accounts,
      refusalLimiter: new RefusalLimiter({ per_second: 1, burst: 100 }, core.clock),
      rateLimiter: new RateLimiter({ general: { per_second: 0.001, burst: 30 }, statistics: { per_second: 1, burst: 1 } }, core.clock),
      storage: {
        get ok() {
          return storageOk;
        },
        reason: 'disk full',
      },
      settings: () => ({ enabled: true, bodyLimitBytes: 1024, bodyMemoryBytes: 16 * 1024 }),
      routes: ROUTES,
      assetsDir: defaultAssetsDir(),
    };
    const hooks = dashboardHooks(deps);
    const app = new Koa();
    app.silent = true;
    app.use(requestContext(createLogger('silent')) as unknown as Koa.Middleware);
    app.use(errorResponses as unknown as Koa.Middleware);
    app.use(transport(() => ({ trustedProxies: [] })) as unknown as Koa.Middleware);
    app.use(hooks.middleware as unknown as Koa.Middleware);
    listener = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => listener.once('listening', resolve));
    url = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => listener.close(resolve));
    await server.stop();
  });

  const probe = () => `/ui/api/dashboard/accounts/${server.accountId}/probe`;

  it("answers an account's route with its session, CSRF token and a key holding the route's scopes", async () => {
    const session = await signIn({ url }, server.adminKey);
    const res = await ui({ url }, 'GET', probe(), { cookie: session.cookie, csrf: session.csrf });
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.deep.equal({ account: server.accountId, key: session.info.key_id, session: 'account' });
    const posted = await ui({ url }, 'POST', probe(), { cookie: session.cookie, csrf: session.csrf, body: { a: 1 } });
    expect(posted.status, posted.text).to.equal(202);
    expect(posted.body).to.deep.equal({ bytes: 7 });
  });

  it('refuses without a session (401), without the CSRF token (403), another account (401), a key without the scope (403)', async () => {
    const session = await signIn({ url }, server.adminKey);
    expect((await ui({ url }, 'GET', probe())).status).to.equal(401);
    expect((await ui({ url }, 'GET', probe(), { cookie: session.cookie })).status).to.equal(403);
    const other = await server.daemon.core.accounts.create({ name: 'B', website: 'https://b.example', ownerEmail: 'o@b2.example' });
    const elsewhere = await ui({ url }, 'GET', `/ui/api/dashboard/accounts/${other.id}/probe`, { cookie: session.cookie, csrf: session.csrf });
    expect(elsewhere.status).to.equal(401);
    expect((await ui({ url }, 'GET', '/ui/api/dashboard/accounts/not-a-uuid/probe', { cookie: session.cookie, csrf: session.csrf })).status).to.equal(400);
    const created = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, { body: { label: 'narrow', scopes: ['domains:read'] } });
    const narrow = await signIn({ url }, created.body.secret_key as string);
    const refused = await ui({ url }, 'GET', probe(), { cookie: narrow.cookie, csrf: narrow.csrf });
    expect(refused.status).to.equal(403);
    expect(refused.body.message).to.equal('Insufficient permissions for the required scope');
  });

  it('refuses a write with 507 while the store cannot take it, and a body over the limit with 413', async () => {
    const session = await signIn({ url }, server.adminKey);
    storageOk = false;
    try {
      expect((await ui({ url }, 'POST', probe(), { cookie: session.cookie, csrf: session.csrf, body: {} })).status).to.equal(507);
      expect((await ui({ url }, 'GET', probe(), { cookie: session.cookie, csrf: session.csrf })).status).to.equal(200);
    } finally {
      storageOk = true;
    }
    const big = await ui({ url }, 'POST', probe(), { cookie: session.cookie, csrf: session.csrf, body: { x: 'y'.repeat(2000) } });
    expect(big.status).to.equal(413);
  });

  it("lets only an operator session reach the operator's routes, and no operator session reach an account's", async () => {
    const account = await signIn({ url }, server.adminKey);
    const refused = await ui({ url }, 'GET', '/ui/api/operator/probe', { cookie: account.cookie, csrf: account.csrf });
    expect(refused.status).to.equal(403);
    expect(refused.body).to.deep.equal({ message: "the operator's page" });
    const token = await deps.sessions.createLoginLink();
    const signedIn = await ui({ url }, 'POST', '/ui/session/operator', { body: { token } });
    const cookie = cookieOf(signedIn.headers.get('set-cookie'));
    const csrf = signedIn.body.csrf_token as string;
    const ok = await ui({ url }, 'GET', '/ui/api/operator/probe', { cookie, csrf });
    expect(ok.status).to.equal(200);
    expect(ok.body).to.deep.equal({ operator: 'operator' });
    expect((await ui({ url }, 'GET', '/ui/api/operator/probe', { cookie })).status).to.equal(403);
    expect((await ui({ url }, 'GET', probe(), { cookie, csrf })).status).to.equal(403);
  });

  it('answers an unknown route with 404 and a known path with another method with 405', async () => {
    const session = await signIn({ url }, server.adminKey);
    expect((await ui({ url }, 'GET', '/ui/api/operator/nothing', { cookie: session.cookie, csrf: session.csrf })).status).to.equal(404);
    const wrong = await ui({ url }, 'DELETE', probe(), { cookie: session.cookie, csrf: session.csrf });
    expect(wrong.status).to.equal(405);
    expect(wrong.headers.get('allow')).to.contain('GET');
  });

  // Last: it spends the account's rate (the sign-ins above took from it too).
  it("takes the account's rate limit", async () => {
    const session = await signIn({ url }, server.adminKey);
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) statuses.push((await ui({ url }, 'GET', probe(), { cookie: session.cookie, csrf: session.csrf })).status);
    expect(statuses).to.include(429);
  });

  it('refuses to mount a dashboard route that states no scopes or is not under /accounts/:account_id/', () => {
    const handler = async () => {};
    expect(() => dashboardHooks({ ...deps, routes: [{ area: 'dashboard', method: 'GET', path: '/accounts/:account_id/x', handler }] })).to.throw(/scopes/);
    expect(() => dashboardHooks({ ...deps, routes: [{ area: 'dashboard', method: 'GET', path: '/x', security: [], handler }] })).to.throw(/account_id/);
  });
});
