import type { Next } from 'koa';
import type { Accounts } from '../accounts/accounts.ts';
import type { ApiKeys } from '../accounts/api-keys.ts';
import type { ApiContext } from '../api/context.ts';
import { admitKey, v2Refusal } from '../api/middleware/auth.ts';
import type { ApiKeyRecord } from '../store/records.ts';
import { AppError, forbidden, unauthorized } from '../util/errors.ts';
import type { DashboardSession, DashboardState } from './contract.ts';
import type { DashboardSessions } from './sessions.ts';

/** The session cookie: its token, HttpOnly, for /ui only. */
export const SESSION_COOKIE = 'postilion_session';

export const notSignedIn = () => unauthorized('not signed in');
export const csrfRefused = () => forbidden('missing or wrong X-CSRF-Token');

/** The session, the key and the account behind a dashboard request, checked on every request. */
export class SessionAuth {
  constructor(
    private readonly sessions: DashboardSessions,
    private readonly apiKeys: ApiKeys,
    private readonly accounts: Accounts,
  ) {}

  /** The live session of the request's cookie, or null. */
  session(ctx: ApiContext): Promise<DashboardSession | null> {
    return this.sessions.open(ctx.cookies.get(SESSION_COOKIE));
  }

  /** The session, which must be signed in and show its CSRF token; else 401 / 403. */
  async withCsrf(ctx: ApiContext): Promise<DashboardSession> {
    const session = await this.session(ctx);
    if (!session) throw notSignedIn();
    if (!this.sessions.csrfMatches(session, ctx.get('x-csrf-token') || undefined)) throw csrfRefused();
    (ctx.state as { dashboard?: DashboardState }).dashboard = { session };
    return session;
  }

  /**
   * An account session's key, checked exactly as the API checks a bearer's (auth.ts admitKey: live
   * v2 key, the path's account, account active, address in the allow list); sets ctx.state.auth.
   * Null when the key is gone or no longer admitted, with the API's refusal.
   */
  async admit(ctx: ApiContext, session: DashboardSession): Promise<AppError | null> {
    if (session.kind !== 'account' || session.keyId === null || session.accountId === null)
      return forbidden('an operator session has no account: sign in with an API key');
    const key = await this.keyOf(session.accountId, session.keyId);
    const refusal = await admitKey(this.accounts, ctx, key, 'v2');
    return refusal ? v2Refusal(refusal) : null;
  }

  /** The layer in place of bearer authentication: session, CSRF token, then the key as above. */
  readonly account = async (ctx: ApiContext, next: Next): Promise<void> => {
    const session = await this.withCsrf(ctx);
    const refused = await this.admit(ctx, session);
    if (refused) throw refused;
    await next();
  };

  /** The layer of the operator's page: an operator session and its CSRF token. */
  readonly operator = async (ctx: ApiContext, next: Next): Promise<void> => {
    const session = await this.withCsrf(ctx);
    if (session.kind !== 'operator') throw forbidden("the operator's page");
    await next();
  };

  private async keyOf(accountId: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    try {
      return await this.apiKeys.get(accountId, keyId);
    } catch (err) {
      if (err instanceof AppError && err.status === 404) return undefined;
      throw err;
    }
  }
}
