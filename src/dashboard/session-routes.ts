import type { Next } from 'koa';
import type { Accounts } from '../accounts/accounts.ts';
import type { ApiKeys } from '../accounts/api-keys.ts';
import type { ApiContext } from '../api/context.ts';
import { identify, v2Refusal } from '../api/middleware/auth.ts';
import { rateLimit, type AnyRateLimiter } from '../api/middleware/rate-limit.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { AppError, badRequest } from '../util/errors.ts';
import type { DashboardSession } from './contract.ts';
import { csrfRefused, notSignedIn, SESSION_COOKIE, type SessionAuth } from './session-auth.ts';
import type { DashboardSessions } from './sessions.ts';

/** A sign-in's body: a JSON object of one short field. */
export const SIGN_IN_BODY_LIMIT = 4096;
const FIELD_LIMIT = 512;

/** What the page is told of its session (foundation's SessionInfo). */
export interface SessionInfo {
  kind: 'account' | 'operator';
  account_id: string | null;
  account_name: string | null;
  key_id: string | null;
  scopes: string[];
  expires_at: string;
  csrf_token: string;
}

export interface SessionRouteDeps {
  sessions: DashboardSessions;
  auth: SessionAuth;
  apiKeys: ApiKeys;
  accounts: Accounts;
  /** The API's rate limiter: a sign-in is one request of the key's account, as any API call. */
  rateLimiter: AnyRateLimiter;
  metrics?: Metrics | undefined;
}

const linkRefused = () => new AppError(401, 'this sign-in link is not valid (used, expired or unknown)');

/** The handlers of /ui/session (sign in with a key, read, sign out) and /ui/session/operator. */
export function sessionHandlers(deps: SessionRouteDeps) {
  const counted = async (kind: 'api_key' | 'operator', work: () => Promise<void>): Promise<void> => {
    try {
      await work();
      deps.metrics?.dashboardSignIns.inc({ kind, result: 'ok' });
    } catch (err) {
      if (err instanceof AppError && (err.status === 401 || err.status === 403)) deps.metrics?.dashboardSignIns.inc({ kind, result: 'refused' });
      throw err;
    }
  };

  // Each sign-in stores a session: a valid key may not make them faster than the account's rate.
  const accountRate = rateLimit(deps.rateLimiter, 'general');

  return {
    /** POST /ui/session {api_key}: the key checked as the API checks a bearer, then a session for it. */
    signIn: (ctx: ApiContext, next: Next): Promise<void> =>
      counted('api_key', async () => {
        const secret = field(ctx, 'api_key');
        ctx.params = {};
        const refusal = await identify(deps.apiKeys, deps.accounts, ctx, secret, 'v2');
        if (refusal) throw refusal === 'malformed' ? new AppError(401, 'Invalid API key') : v2Refusal(refusal);
        await accountRate(ctx, () => Promise.resolve());
        const { key, account } = ctx.state.auth!;
        const { token, session } = await deps.sessions.create('account', key.id, account.id);
        setCookie(ctx, token, session);
        ctx.status = 201;
        ctx.body = info(
          session,
          account.name,
          key.scopes.map((s) => s.scope),
        );
        await next();
      }),

    /** POST /ui/session/operator {token}: a one-time link from `postilion ui login`, used once. */
    operatorSignIn: (ctx: ApiContext, next: Next): Promise<void> =>
      counted('operator', async () => {
        const token = field(ctx, 'token');
        if (!(await deps.sessions.consumeLoginLink(token))) throw linkRefused();
        const { token: cookie, session } = await deps.sessions.create('operator');
        setCookie(ctx, cookie, session);
        ctx.status = 201;
        ctx.body = info(session, null, []);
        await next();
      }),

    /** GET /ui/session: who is signed in, while the key and account still allow it. */
    read: async (ctx: ApiContext): Promise<void> => {
      const session = await deps.auth.session(ctx);
      if (!session) throw notSignedIn();
      if (session.kind === 'operator') {
        ctx.body = info(session, null, []);
        return;
      }
      ctx.params = {};
      if (await deps.auth.admit(ctx, session)) throw notSignedIn();
      const { key, account } = ctx.state.auth!;
      ctx.body = info(
        session,
        account.name,
        key.scopes.map((s) => s.scope),
      );
    },

    /** DELETE /ui/session: the session revoked, the cookie cleared. */
    signOut: async (ctx: ApiContext): Promise<void> => {
      const session = await deps.auth.session(ctx);
      if (!session) throw notSignedIn();
      if (!deps.sessions.csrfMatches(session, ctx.get('x-csrf-token') || undefined)) throw csrfRefused();
      await deps.sessions.revoke(session);
      ctx.append('Set-Cookie', `${SESSION_COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0${ctx.state.https ? '; Secure' : ''}`);
      ctx.status = 204;
    },
  };
}

/** Sign-ins take JSON only: a form posted from another site cannot be one. */
export function requireJson(ctx: ApiContext, next: Next): Promise<void> {
  if (!ctx.is('application/json')) throw new AppError(415, 'Content-Type must be application/json');
  return next();
}

/** A string field of the request's JSON object body; 400 for anything else. */
function field(ctx: ApiContext, name: string): string {
  let body: unknown;
  try {
    body = JSON.parse(ctx.state.rawBody.toString('utf8'));
  } catch {
    throw badRequest('the request body is not valid JSON');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('the request body must be a JSON object');
  const value = (body as Record<string, unknown>)[name];
  if (typeof value !== 'string' || value === '') throw badRequest(`${name} is required and must be a string`);
  if (value.length > FIELD_LIMIT) throw badRequest(`${name} must be at most ${FIELD_LIMIT} characters`);
  return value;
}

function setCookie(ctx: ApiContext, token: string, session: DashboardSession): void {
  const maxAge = Math.max(0, Math.floor((session.expiresAt - session.createdAt) / 1000));
  ctx.append('Set-Cookie', `${SESSION_COOKIE}=${token}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${ctx.state.https ? '; Secure' : ''}`);
}

export function info(session: DashboardSession, accountName: string | null, scopes: string[]): SessionInfo {
  return {
    kind: session.kind,
    account_id: session.accountId,
    account_name: accountName,
    key_id: session.keyId,
    scopes,
    expires_at: new Date(session.expiresAt).toISOString(),
    csrf_token: session.csrfToken,
  };
}
