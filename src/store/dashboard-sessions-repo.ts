import { createHash } from 'node:crypto';
import { WriteConflictError, type Store } from './store.ts';

/** A web dashboard session as stored: keyed by the SHA-256 of the cookie's token, never the token. */
export interface DashboardSessionRecord {
  v: 1;
  /** Hex SHA-256 of the cookie's token. */
  id: string;
  kind: 'account' | 'operator';
  keyId: string | null;
  accountId: string | null;
  csrfToken: string;
  /** ms since the epoch. */
  createdAt: number;
  expiresAt: number;
}

/** An operator's one-time sign-in link, keyed by the SHA-256 of its token. */
export interface LoginLinkRecord {
  v: 1;
  expiresAt: number;
  /** When it was used (ms), or null while it may still be. */
  usedAt: number | null;
}

/** Sessions and links share the family; their keys start with these. */
const SESSION = 's:';
const LINK = 'l:';

/** Entries read per sweep pass: the family holds few records, but a pass stays bounded. */
const SWEEP_PAGE = 500;

/** The hex SHA-256 of a token: what the store keys sessions and links by. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * Dashboard sessions and the operator's one-time sign-in links (family `dashboardSessions`,
 * shared in cluster mode, so any node serves any session). Written with synced commits; a link
 * is taken with `expected`, so two nodes cannot both use it.
 */
export class DashboardSessionsRepo {
  /** Links being taken by this process: LevelDB does not check `expected`, one writer does it here. */
  private readonly taking = new Set<string>();

  constructor(private readonly store: Store) {}

  async create(session: DashboardSessionRecord): Promise<void> {
    await this.store.commit([{ type: 'put', family: 'dashboardSessions', key: SESSION + session.id, value: session }]);
  }

  /** The session stored under this id (the token's hash), live at `now`; undefined when absent or expired. */
  async get(id: string, now: number): Promise<DashboardSessionRecord | undefined> {
    const session = await this.store.get<DashboardSessionRecord>('dashboardSessions', SESSION + id);
    return session && session.expiresAt > now ? session : undefined;
  }

  async revoke(id: string): Promise<void> {
    await this.store.commit([{ type: 'del', family: 'dashboardSessions', key: SESSION + id }]);
  }

  /** Ends every session; the number ended. */
  async revokeAll(): Promise<number> {
    return this.dropWhere(SESSION, () => true);
  }

  /** Deletes the sessions and links expired before `now`; how many. */
  async sweep(now: number): Promise<number> {
    const sessions = await this.dropWhere(SESSION, (record) => (record as DashboardSessionRecord).expiresAt <= now);
    const links = await this.dropWhere(LINK, (record) => (record as LoginLinkRecord).expiresAt <= now);
    return sessions + links;
  }

  async createLoginLink(hash: string, expiresAt: number): Promise<void> {
    const link: LoginLinkRecord = { v: 1, expiresAt, usedAt: null };
    await this.store.commit([{ type: 'put', family: 'dashboardSessions', key: LINK + hash, value: link, expected: null }]);
  }

  /**
   * Marks the link used if it is unused and live at `now`: true for exactly one caller, in the
   * cluster too (the mark is written over the unused record with `expected`).
   */
  async consumeLoginLink(hash: string, now: number): Promise<boolean> {
    if (this.taking.has(hash)) return false;
    this.taking.add(hash);
    try {
      const link = await this.store.get<LoginLinkRecord>('dashboardSessions', LINK + hash);
      if (!link || link.usedAt !== null || link.expiresAt <= now) return false;
      const used: LoginLinkRecord = { ...link, usedAt: now };
      await this.store.commit([{ type: 'put', family: 'dashboardSessions', key: LINK + hash, value: used, expected: link }]);
      return true;
    } catch (err) {
      if (err instanceof WriteConflictError) return false;
      throw err;
    } finally {
      this.taking.delete(hash);
    }
  }

  private async dropWhere(prefix: string, drop: (record: unknown) => boolean): Promise<number> {
    let dropped = 0;
    let after: string | null = null;
    for (;;) {
      const range: { gt: string; lt: string; limit: number } = { gt: after ?? prefix, lt: `${prefix}\uffff`, limit: SWEEP_PAGE };
      const rows = await this.store.families.dashboardSessions.iterator(range).all();
      const gone = rows.filter(([, record]) => drop(record)).map(([key]) => ({ type: 'del' as const, family: 'dashboardSessions' as const, key }));
      if (gone.length > 0) await this.store.commit(gone);
      dropped += gone.length;
      if (rows.length < SWEEP_PAGE) return dropped;
      after = rows.at(-1)![0];
    }
  }
}
