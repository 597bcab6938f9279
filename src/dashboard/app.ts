import Router from '@koa/router';
import type { Next } from 'koa';
import type { Accounts } from '../accounts/accounts.ts';
import type { ApiKeys } from '../accounts/api-keys.ts';
import type { DashboardHooks } from '../api/app.ts';
import { chainOf, type Layer } from '../api/chain.ts';
import type { ApiContext, ApiState } from '../api/context.ts';
import { limitRefusals, requireScopes } from '../api/middleware/auth.ts';
import { BodyBudget, rawBody } from '../api/middleware/body.ts';
import { rateLimit, type AnyRateLimiter, type AnyRefusalLimiter } from '../api/middleware/rate-limit.ts';
import { refuseWithoutStorage, type StorageState } from '../api/middleware/storage.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { AppError, notFound } from '../util/errors.ts';
import { ASSETS, readAsset } from './assets.ts';
import type { DashboardRoute } from './contract.ts';
import { checkOrigin, setSecurityHeaders } from './headers.ts';
import { SessionAuth } from './session-auth.ts';
import { requireJson, sessionHandlers, SIGN_IN_BODY_LIMIT } from './session-routes.ts';
import type { DashboardSessions } from './sessions.ts';

/** What the dashboard needs now (read per request, so a reload applies at once). */
export interface DashboardSettings {
  enabled: boolean;
  /** The API's body limits (api.body_limit_bytes, api.body_memory_bytes). */
  bodyLimitBytes: number;
  bodyMemoryBytes: number;
}

export interface DashboardDeps {
  sessions: DashboardSessions;
  apiKeys: ApiKeys;
  accounts: Accounts;
  /** The API's own limiters: sign-ins and sessions take from the same buckets as bearer keys. */
  refusalLimiter: AnyRefusalLimiter;
  rateLimiter: AnyRateLimiter;
  storage?: StorageState | undefined;
  metrics?: Metrics | undefined;
  settings: () => DashboardSettings;
  /** The dashboard-only operations (activity.ts, operator.ts). */
  routes: readonly DashboardRoute[];
  /** Where the built page is (dist/ui). */
  assetsDir: string;
}

const notBuilt = () => new AppError(503, 'the dashboard is not built: run npm run build');
const notAllowed = (allow: string) => new AppError(405, 'method not allowed', { Allow: allow });
const READS = new Set(['GET', 'HEAD']);
const OURS = /^\/ui(?:\/|$)/i;

/**
 * The web dashboard on the API's app (api/app.ts DashboardHooks): every /ui answer gets the
 * security headers; state changes must come from our origin; the page and its files, the
 * session endpoints and the dashboard-only operations are answered here, and `/ui/api/v2/…`
 * goes on to the API's router with `sessionAuth` in place of the bearer.
 */
export function dashboardHooks(deps: DashboardDeps): DashboardHooks {
  const auth = new SessionAuth(deps.sessions, deps.apiKeys, deps.accounts);
  const refusals = limitRefusals(deps.refusalLimiter);
  const budget = new BodyBudget(() => deps.settings().bodyMemoryBytes);
  const signInBody = rawBody(() => SIGN_IN_BODY_LIMIT, budget);
  const session = sessionHandlers({
    sessions: deps.sessions,
    auth,
    apiKeys: deps.apiKeys,
    accounts: deps.accounts,
    rateLimiter: deps.rateLimiter,
    metrics: deps.metrics,
  });
  const signIn = chainOf([refusals, requireJson, signInBody, session.signIn]);
  const operatorSignIn = chainOf([refusals, requireJson, signInBody, session.operatorSignIn]);
  const routes = routeDispatch(
    deps,
    auth,
    refusals,
    rawBody(() => deps.settings().bodyLimitBytes, budget),
  );

  const middleware = async (ctx: ApiContext, next: Next): Promise<unknown> => {
    // The API's router ignores case: so does the test of what is ours (without a copy of every API path).
    if (!OURS.test(ctx.path)) return next();
    const path = ctx.path.toLowerCase();
    setSecurityHeaders(ctx);
    if (!deps.settings().enabled) throw notFound('not found');
    if (!READS.has(ctx.method)) checkOrigin(ctx);
    if (path.startsWith('/ui/api/v2/')) return next();
    if (path === '/ui') {
      if (!READS.has(ctx.method)) throw notAllowed('GET, HEAD');
      ctx.status = 301;
      ctx.redirect('/ui/');
      return;
    }
    const asset = ASSETS[ctx.path];
    if (asset) {
      if (!READS.has(ctx.method)) throw notAllowed('GET, HEAD');
      const bytes = await readAsset(deps.assetsDir, asset.file);
      if (!bytes) throw notBuilt();
      ctx.set('Cache-Control', 'no-cache');
      ctx.type = asset.type;
      ctx.body = bytes;
      return;
    }
    if (path === '/ui/session') {
      if (ctx.method === 'POST') return signIn(ctx, next);
      if (READS.has(ctx.method)) return session.read(ctx);
      if (ctx.method === 'DELETE') return session.signOut(ctx);
      throw notAllowed('GET, HEAD, POST, DELETE');
    }
    if (path === '/ui/session/operator') {
      if (ctx.method === 'POST') return operatorSignIn(ctx, next);
      throw notAllowed('POST');
    }
    if (path.startsWith('/ui/api/dashboard/') || path.startsWith('/ui/api/operator/')) return routes(ctx, next);
    throw notFound('not found');
  };
  return { middleware, sessionAuth: auth.account };
}

/**
 * The dashboard-only operations on a router of their own. Area 'dashboard': the refused-
 * authentication limit, the session and its key (as the API's bearer), the account's rate, the
 * scopes the route states, the storage guard for writes, the body. Area 'operator': the limit,
 * an operator session, the storage guard for writes, the body.
 */
function routeDispatch(deps: DashboardDeps, auth: SessionAuth, refusals: Layer, body: Layer): (ctx: ApiContext, next: Next) => Promise<unknown> {
  const router = new Router<ApiState>();
  for (const route of deps.routes) {
    const storage = route.writes && deps.storage ? [refuseWithoutStorage(deps.storage)] : [];
    let chain: Layer[];
    if (route.area === 'dashboard') {
      if (!route.path.startsWith('/accounts/:account_id/'))
        throw new Error(`dashboard route ${route.method} ${route.path}: the path must start with /accounts/:account_id/`);
      if (!route.security) throw new Error(`dashboard route ${route.method} ${route.path}: it must state the scopes it needs`);
      chain = [refusals, auth.account, rateLimit(deps.rateLimiter, 'general'), requireScopes(route.security), ...storage, body, route.handler as Layer];
    } else {
      chain = [refusals, auth.operator, ...storage, body, route.handler as Layer];
    }
    router.register(`/ui/api/${route.area}${route.path}`, [route.method], chainOf(chain) as never, { name: `ui:${route.area}:${route.method} ${route.path}` });
  }
  const routed = router.routes() as unknown as (ctx: ApiContext, next: Next) => Promise<unknown>;
  const allowed = router.allowedMethods() as unknown as (ctx: ApiContext, next: Next) => Promise<unknown>;
  return (ctx, next) => routed(ctx, () => allowed(ctx, next));
}
