import { randomBytes, timingSafeEqual } from 'node:crypto';
import { tokenHash, type DashboardSessionRecord, type DashboardSessionsRepo } from '../store/dashboard-sessions-repo.ts';
import type { Clock } from '../util/time.ts';
import type { DashboardSession } from './contract.ts';

/** What a session's lifetimes are now (the `dashboard` config section; read per call, so a reload applies at once). */
export interface SessionSettings {
  sessionTtlMs: number;
  loginLinkTtlMs: number;
}

/** A cookie or link token: 32 random bytes, base64url. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Sign-ins between two sweeps of expired sessions and links. */
const SWEEP_EVERY = 50;

function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The dashboard's sessions: a random token in the browser's cookie, its SHA-256 in the store
 * (DashboardSessionsRepo), a CSRF token per session, and the operator's one-time sign-in links.
 * Expired sessions are refused on read and swept every few sign-ins.
 */
export class DashboardSessions {
  private signIns = 0;

  constructor(
    private readonly repo: DashboardSessionsRepo,
    private readonly clock: Clock,
    private readonly settings: () => SessionSettings,
  ) {}

  /** A new session for an API key (`account`) or the operator; `token` goes into the cookie, only once. */
  async create(kind: 'account', keyId: string, accountId: string): Promise<{ token: string; session: DashboardSession }>;
  async create(kind: 'operator'): Promise<{ token: string; session: DashboardSession }>;
  async create(
    kind: DashboardSession['kind'],
    keyId: string | null = null,
    accountId: string | null = null,
  ): Promise<{ token: string; session: DashboardSession }> {
    const token = newToken();
    const now = this.clock.now();
    const record: DashboardSessionRecord = {
      v: 1,
      id: tokenHash(token),
      kind,
      keyId,
      accountId,
      csrfToken: newToken(),
      createdAt: now,
      expiresAt: now + this.settings().sessionTtlMs,
    };
    await this.repo.create(record);
    if (++this.signIns % SWEEP_EVERY === 0) await this.sweep();
    return { token, session: sessionOf(record) };
  }

  /** The live session a cookie's token stands for, or null (malformed, unknown, expired or revoked). */
  async open(token: string | undefined): Promise<DashboardSession | null> {
    if (token === undefined || !TOKEN.test(token)) return null;
    const record = await this.repo.get(tokenHash(token), this.clock.now());
    return record ? sessionOf(record) : null;
  }

  /** Whether `presented` is the session's CSRF token (compared in constant time). */
  csrfMatches(session: DashboardSession, presented: string | undefined): boolean {
    if (presented === undefined) return false;
    const want = Buffer.from(session.csrfToken);
    const got = Buffer.from(presented);
    return want.length === got.length && timingSafeEqual(want, got);
  }

  async revoke(session: DashboardSession): Promise<void> {
    await this.repo.revoke(session.id);
  }

  /** Ends every session (`postilion ui logout --all`); the number ended. */
  revokeAll(): Promise<number> {
    return this.repo.revokeAll();
  }

  /** Deletes expired sessions and links; how many. */
  sweep(): Promise<number> {
    return this.repo.sweep(this.clock.now());
  }

  /** A new one-time operator sign-in token, valid `ttlMs` (default: dashboard.login_link_ttl_seconds). */
  async createLoginLink(ttlMs: number = this.settings().loginLinkTtlMs): Promise<string> {
    const token = newToken();
    await this.repo.createLoginLink(tokenHash(token), this.clock.now() + ttlMs);
    return token;
  }

  /** Takes a sign-in token: true once, for a live unused token; false for anything else. */
  async consumeLoginLink(token: string): Promise<boolean> {
    if (!TOKEN.test(token)) return false;
    return this.repo.consumeLoginLink(tokenHash(token), this.clock.now());
  }
}

function sessionOf(record: DashboardSessionRecord): DashboardSession {
  return {
    id: record.id,
    kind: record.kind,
    keyId: record.keyId,
    accountId: record.accountId,
    csrfToken: record.csrfToken,
    createdAt: record.createdAt,
    expiresAt: record.expiresAt,
  };
}
