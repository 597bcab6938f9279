import type { UiSignIn } from '../control/server.ts';
import type { Clock } from '../util/time.ts';

/** What the operator's sign-in needs of the dashboard's sessions (DashboardSessions). */
export interface LoginLinkSessions {
  /** Stores a one-time sign-in token (hashed) valid for `ttlMs`; returns the token. */
  createLoginLink(ttlMs: number): Promise<string>;
  /** Revokes every session; how many. */
  revokeAll(): Promise<number>;
}

export interface LoginLinkDeps {
  sessions: LoginLinkSessions;
  /** `dashboard.login_link_ttl_seconds`, read at each link (live on reload). */
  ttlSeconds: () => number;
  /** `dashboard.public_url`, or the API listener's URL when it is null. */
  baseUrl: () => string;
  clock: Clock;
}

/** The page a link opens: the token rides in the fragment, which browsers never send to a server nor put in a Referer. */
export function loginUrl(base: string, token: string): string {
  return `${base.replace(/\/+$/, '')}/ui/#operator-login=${encodeURIComponent(token)}`;
}

/**
 * `postilion ui login` and `postilion ui logout --all` as the control socket serves them
 * (ControlHandlers.ui). The link is a secret: it is returned, never logged.
 */
export function uiSignIn(deps: LoginLinkDeps): UiSignIn {
  return {
    async login() {
      const ttlMs = deps.ttlSeconds() * 1000;
      const expiresAt = deps.clock.now() + ttlMs;
      const token = await deps.sessions.createLoginLink(ttlMs);
      return { url: loginUrl(deps.baseUrl(), token), expires_at: new Date(expiresAt).toISOString() };
    },
    async logoutAll() {
      return { revoked: await deps.sessions.revokeAll() };
    },
  };
}
