import type ipaddr from 'ipaddr.js';
import type { ParameterizedContext } from 'koa';
import type { Logger } from 'pino';
import type { Grants } from '../accounts/scopes.ts';
import type { AccountRecord, ApiKeyRecord } from '../store/records.ts';

export interface Auth {
  key: ApiKeyRecord;
  account: AccountRecord;
  grants: Grants;
}

export interface ApiState {
  requestId: string;
  log: Logger;
  /** The client's address: the socket peer, or X-Forwarded-For behind a trusted proxy. */
  clientIp: ipaddr.IPv4 | ipaddr.IPv6;
  /** The client spoke HTTPS: to our listener, or to a trusted proxy that says so (X-Forwarded-Proto). */
  https: boolean;
  /** Raw request body bytes (empty for bodiless requests). */
  rawBody: Buffer;
  auth?: Auth;
}

export type ApiContext = ParameterizedContext<ApiState> & { params: Record<string, string> };

/** The authenticated caller; only reachable behind the authentication middleware. */
export function authOf(ctx: ApiContext): Auth {
  if (!ctx.state.auth) throw new Error('route reached without authentication');
  return ctx.state.auth;
}
