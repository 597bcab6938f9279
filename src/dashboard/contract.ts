import type { Next } from 'koa';
import type { Security } from '../accounts/scopes.ts';
import type { ApiContext } from '../api/context.ts';

/**
 * A signed-in browser. The cookie holds a random token; the store keeps only its SHA-256 (`id`),
 * so a copy of the store signs nobody in. An account session is exactly its API key: the key's
 * account and scopes, read again on every request (a key deleted or changed, an account
 * suspended, an address outside the key's allow list: refused as the API refuses them).
 */
export interface DashboardSession {
  /** SHA-256 of the cookie's token, hex. */
  id: string;
  kind: 'account' | 'operator';
  /** The API key the session stands for (account sessions); null for the operator. */
  keyId: string | null;
  accountId: string | null;
  /** Sent back by the page in X-CSRF-Token on every /ui/api request and every state change. */
  csrfToken: string;
  /** ms since the epoch. */
  createdAt: number;
  expiresAt: number;
}

/** What the dashboard's handlers find on `ctx.state` once the session middleware let a request through. */
export interface DashboardState {
  session: DashboardSession;
}

export type DashboardContext = ApiContext & { state: ApiContext['state'] & { dashboard?: DashboardState } };

/**
 * A dashboard-only operation, served at `/ui/api/<area>/<path>` behind the session, the CSRF
 * check, the refused-authentication limiter and (area 'dashboard') the key's rate limit and the
 * scope gate; area 'operator' takes only an operator session. Paths use `:name` parameters like
 * @koa/router; an account route's path starts with `/accounts/:account_id`, checked against the
 * session's account as the API checks it.
 */
export interface DashboardRoute {
  area: 'dashboard' | 'operator';
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  /** The scopes the key must hold (area 'dashboard'), as the API's operations state them. */
  security?: Security;
  /** Writes are refused with 507 while the store cannot take them. */
  writes?: boolean;
  handler: (ctx: DashboardContext, next: Next) => Promise<void>;
}
