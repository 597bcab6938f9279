import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import Koa from 'koa';
import { errorResponses } from '../../../src/api/middleware/errors.ts';
import { requestContext, transport } from '../../../src/api/middleware/request-context.ts';
import { RateLimiter, RefusalLimiter } from '../../../src/api/middleware/rate-limit.ts';
import { dashboardHooks } from '../../../src/dashboard/app.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { signIn, ui } from './helpers.ts';

describe('dashboard settings and limits', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ config: { api: { auth_failures: { burst: 3, per_second: 0.001 } } } });
  });
  after(async () => {
    await server.stop();
  });

  it('is switched off and on by dashboard.enabled at a reload: off, every /ui path is 404', async () => {
    const session = await signIn(server, server.adminKey);
    const off = server.daemon.reload({ ...server.daemon.runningConfig, dashboard: { ...server.daemon.runningConfig.dashboard, enabled: false } });
    expect(off.applied).to.deep.equal(['dashboard.enabled']);
    for (const path of ['/ui', '/ui/', '/ui/assets/app.js', '/ui/session', `/ui/api/v2/accounts/${server.accountId}/api-keys`]) {
      const res = await ui(server, 'GET', path, { cookie: session.cookie, csrf: session.csrf });
      expect(res.status, path).to.equal(404);
      expect(res.body).to.deep.equal({ message: 'not found' });
    }
    expect((await ui(server, 'POST', '/ui/session', { body: { api_key: server.adminKey } })).status).to.equal(404);
    server.daemon.reload({ ...server.daemon.runningConfig, dashboard: { ...server.daemon.runningConfig.dashboard, enabled: true } });
    expect((await ui(server, 'GET', '/ui/session', { cookie: session.cookie })).status).to.equal(200);
  });

  it('applies a new session lifetime at a reload to the next sign-in', async () => {
    server.daemon.reload({ ...server.daemon.runningConfig, dashboard: { ...server.daemon.runningConfig.dashboard, session_ttl_minutes: 5 } });
    const { setCookie } = await signIn(server, server.adminKey);
    expect(setCookie).to.contain('Max-Age=300');
  });

  // Last: it spends this address's refused authentications.
  it("shares the API's limit of refused authentications: past it, sign-ins and bearer keys get 429", async () => {
    const wrong = { api_key: `aha-sk-${'B'.repeat(64)}` };
    for (let i = 0; i < 2; i++) expect((await ui(server, 'POST', '/ui/session', { body: wrong })).status).to.equal(401);
    expect((await ui(server, 'POST', '/ui/session/operator', { body: { token: 'C'.repeat(43) } })).status).to.equal(401);
    const limited = await ui(server, 'POST', '/ui/session', { body: { api_key: server.adminKey } });
    expect(limited.status).to.equal(429);
    expect(limited.body.message).to.contain('Too many failed authentications');
    expect(limited.headers.get('retry-after')).to.match(/^\d+$/);
    expect((await call(server, 'GET', '/v2/ping')).status).to.equal(429);
  });
});

describe('dashboard not built', () => {
  let server: TestServer;
  let listener: ReturnType<Koa['listen']>;
  let url: string;
  const empty = mkdtempSync(join(tmpdir(), 'postilion-ui-'));
  before(async () => {
    server = await startServer();
    const { core } = server.daemon;
    // The dashboard's own middleware over the daemon's services, serving from an empty folder.
    const hooks = dashboardHooks({
      sessions: server.daemon.parts.api.dashboardSessions,
      apiKeys: core.apiKeys,
      accounts: core.accounts,
      refusalLimiter: new RefusalLimiter({ per_second: 1, burst: 10 }, core.clock),
      rateLimiter: new RateLimiter({ general: { per_second: 10, burst: 10 }, statistics: { per_second: 1, burst: 1 } }, core.clock),
      settings: () => ({ enabled: true, bodyLimitBytes: 1024 * 1024, bodyMemoryBytes: 16 * 1024 * 1024 }),
      routes: [],
      assetsDir: empty,
    });
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
    rmSync(empty, { recursive: true, force: true });
  });

  it('answers the page and its files with 503 and says how to build them; sign-in still works', async () => {
    for (const path of ['/ui/', '/ui/assets/app.js', '/ui/assets/app.css']) {
      const res = await ui({ url }, 'GET', path);
      expect(res.status, path).to.equal(503);
      expect(res.body).to.deep.equal({ message: 'the dashboard is not built: run npm run build' });
    }
    expect((await ui({ url }, 'POST', '/ui/session', { body: { api_key: server.adminKey } })).status).to.equal(201);
  });
});
