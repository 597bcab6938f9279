import Router from '@koa/router';
import ipaddr from 'ipaddr.js';
import Koa from 'koa';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { authenticate, requireScopes } from '../../../src/api/middleware/auth.ts';
import { errorResponses } from '../../../src/api/middleware/errors.ts';
import type { ApiContext } from '../../../src/api/context.ts';
import type { Core } from '../../../src/assemblies/core.ts';
import type { DashboardContext, DashboardRoute, DashboardSession } from '../../../src/dashboard/contract.ts';
import { createLogger } from '../../../src/logging/logger.ts';

/**
 * The dashboard's routes served as the dashboard's session layer serves them, for the routes'
 * own tests: `/ui/api/<area><path>`; an account "session" is its API key (Bearer, checked by the
 * API's own authentication and scope gate), the operator's is the header `x-test-operator: 1`.
 * The real session layer (cookies, CSRF) has its own tests. `lines`: the requests' log lines.
 */
export async function mountRoutes(core: Core, routes: DashboardRoute[], lines?: string[]): Promise<{ url: string; close: () => Promise<void> }> {
  const app = new Koa();
  const log = lines ? createLogger('info', { write: (line: string) => void lines.push(line) }) : createLogger('silent');
  app.use(async (ctx, next) => {
    const c = ctx as unknown as ApiContext;
    c.state.log = log;
    c.state.requestId = 'test';
    c.state.clientIp = ipaddr.parse('127.0.0.1');
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.req as AsyncIterable<Buffer>) chunks.push(chunk);
    c.state.rawBody = Buffer.concat(chunks);
    await next();
  });
  app.use(errorResponses as unknown as Koa.Middleware);
  const router = new Router();
  const operator: DashboardSession = { id: 'x', kind: 'operator', keyId: null, accountId: null, csrfToken: 'c', createdAt: 0, expiresAt: Infinity };
  for (const route of routes) {
    const session = async (ctx: DashboardContext, next: Koa.Next) => {
      if (ctx.get('x-test-operator') === '1') {
        ctx.state.dashboard = { session: operator };
        return next();
      }
      await authenticate(core.apiKeys, core.accounts)(ctx, async () => {
        ctx.state.dashboard = { session: { ...operator, kind: 'account', keyId: ctx.state.auth!.key.id, accountId: ctx.state.auth!.account.id } };
        if (route.area === 'dashboard') await requireScopes(route.security ?? [])(ctx, next);
        else await next();
      });
    };
    const path = `/ui/api/${route.area}${route.path}`;
    const chain = [session, route.handler] as unknown as Koa.Middleware[];
    router.register(path, [route.method], chain);
  }
  app.use(router.routes());
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- Koa's callback handles its own rejections
  const server: Server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** One JSON request; `as`: an API key, or 'operator'. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes, asserted by tests
export async function ask(base: string, as: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = as === 'operator' ? { 'x-test-operator': '1' } : { authorization: `Bearer ${as}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
