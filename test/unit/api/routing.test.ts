import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import Koa from 'koa';
import { expect } from 'chai';
import type { ApiState } from '../../../src/api/context.ts';
import { rememberMatches, routedBy } from '../../../src/api/routing.ts';

/** What the router leaves on the context for the handler, and what the client gets. */
type Seen = Record<string, unknown>;

/** An app over a router of three routes (one with two handlers), dispatched by `dispatch`. */
function app(dispatch: 'router' | 'routes'): Koa<ApiState> {
  const router = new Router<ApiState>();
  rememberMatches(router);
  const handler: Koa.Middleware<ApiState> = (ctx) => {
    const c = ctx as unknown as Seen & { request: { params: unknown }; matched: Array<{ path: string }> };
    ctx.body = {
      matched: c.matched.map((layer) => layer.path),
      routeMatched: c.routeMatched,
      captures: c.captures,
      params: c.params,
      requestParams: c.request.params,
      routerPath: c.routerPath,
      routerName: c.routerName ?? null,
      matchedRoute: c._matchedRoute,
      matchedRouteName: c._matchedRouteName,
    };
  };
  router.register('/v2/accounts/:account_id/messages', ['POST'], [handler], { name: 'createMessage' });
  router.register('/v2/accounts/:account_id/messages', ['GET'], [handler], { name: 'getMessages' });
  router.register('/v2/ping', ['GET'], [(_ctx, next) => next(), handler], { name: 'ping' });
  const koa = new Koa<ApiState>();
  koa.use(dispatch === 'router' ? router.routes() : routedBy(router));
  koa.use(router.allowedMethods());
  return koa;
}

async function serve(koa: Koa<ApiState>): Promise<{ url: string; server: Server }> {
  const callback = koa.callback();
  const server = createServer((req, res) => void callback(req, res));
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', () => done()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('routedBy (the router middleware, per (method, path) work kept)', () => {
  let servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.map((s) => new Promise<void>((done) => s.close(() => done()))));
    servers = [];
  });

  it('gives the handler the context the router gives it, and answers what the router answers', async () => {
    const router = await serve(app('router'));
    const kept = await serve(app('routes'));
    servers = [router.server, kept.server];
    const requests: Array<[string, string]> = [
      ['POST', '/v2/accounts/A%20b/messages'],
      ['POST', '/v2/accounts/A%20b/messages'],
      ['POST', '/V2/Accounts/x/messages/'],
      ['GET', '/v2/accounts/%E0%A4%A/messages?x=1'],
      ['HEAD', '/v2/accounts/y/messages'],
      ['GET', '/v2/ping'],
      ['DELETE', '/v2/accounts/y/messages'],
      ['PUT', '/v2/ping'],
      ['GET', '/v2/nothing'],
    ];
    for (const [method, path] of requests) {
      const answer = async (url: string) => {
        const res = await fetch(url + path, { method });
        return { status: res.status, allow: res.headers.get('allow'), body: await res.text() };
      };
      const expected = await answer(router.url);
      expect(await answer(kept.url), `${method} ${path}`).to.deep.equal(expected);
      // Twice: the second answer comes from what was kept.
      expect(await answer(kept.url), `${method} ${path} again`).to.deep.equal(expected);
    }
  });
});
