import type { EventRecorder } from '../events/recorder.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { Page, PageRequest } from '../store/page.ts';
import type { SuppressionRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import type { SuppressionFilter, SuppressionsRepo } from '../store/suppressions-repo.ts';
import type { DomainsRepo } from '../store/domains-repo.ts';
import { badRequest, conflict, notFound } from '../util/errors.ts';
import { newIdAt } from '../util/ids.ts';
import { KeyedMutex } from '../util/keyed-mutex.ts';
import { normalizeDomain } from '../util/domain-name.ts';
import { iso, type Clock } from '../util/time.ts';
import { everyItem } from '../store/page.ts';

/** How long an automatic suppression (hard bounce, final failure) lasts. */
export const AUTOMATIC_SUPPRESSION_DAYS = 30;
const DAY_MS = 86_400_000;
/** Records deleted per batch by a wipe or the expiry purge. */
const BATCH = 500;

export interface NewSuppression {
  email: string;
  /** Omitted: every domain the account has. */
  domain?: string | undefined;
  reason?: string | undefined;
  expiresAt: number;
}

/**
 * The suppression list: addresses not to send to, per account and sender domain. Every change
 * of one (account, email, domain) runs under its lock, so that the API and the delivery outcomes
 * never write two records for one key; each creation records `suppression.created` in its batch.
 */
export class Suppressions {
  private readonly locks = new KeyedMutex();

  constructor(
    private readonly store: Store,
    private readonly repo: SuppressionsRepo,
    private readonly domains: DomainsRepo,
    private readonly events: EventRecorder,
    private readonly clock: Clock,
  ) {}

  /** The suppression in force for this recipient and sender domain, if any. */
  async active(accountId: string, email: string, domain: string): Promise<SuppressionRecord | undefined> {
    const record = await this.repo.get(accountId, email, domain);
    return this.inForce(record, this.clock.now()) ? record : undefined;
  }

  /** One page of the suppressions in force; a `domain` filter must name one of the account's. */
  async list(accountId: string, filter: Omit<SuppressionFilter, 'activeAt'>, page: PageRequest): Promise<Page<SuppressionRecord>> {
    const domain = filter.domain === undefined ? undefined : await this.ownDomain(accountId, filter.domain);
    return this.repo.list(accountId, { ...filter, ...(domain ? { domain } : {}), activeAt: this.clock.now() }, page);
  }

  /**
   * Suppresses the address for the named domain, or for every domain of the account. Keys that
   * already hold a suppression in force are left as they are; a conflict if that is all of them.
   */
  async create(accountId: string, input: NewSuppression): Promise<SuppressionRecord[]> {
    const now = this.clock.now();
    if (input.expiresAt <= now) throw badRequest('expires_at must be in the future');
    // The contract has no 404 for create: a domain that is not the account's is a bad request.
    const domains = input.domain !== undefined ? [await this.ownDomain(accountId, input.domain, badRequest)] : await this.allDomains(accountId);
    if (domains.length === 0) throw badRequest('the account has no domains to suppress the address for');
    const email = input.email.toLowerCase();
    const keys = domains.map((domain) => lockKey(accountId, email, domain));
    return this.locks.runAll(keys, async () => {
      const ops: WriteOp[] = [];
      const created: SuppressionRecord[] = [];
      for (const domain of domains) {
        const previous = await this.repo.get(accountId, email, domain);
        if (this.inForce(previous, now)) continue;
        const record = newRecord(accountId, email, domain, input.reason ?? 'Added through the API', 'api', now, input.expiresAt);
        ops.push(...this.repo.put(record, previous), ...this.announce(record));
        created.push(record);
      }
      if (created.length === 0) {
        throw conflict(
          input.domain !== undefined ? `${email} is already suppressed for ${domains[0]}` : `${email} is already suppressed for every domain of the account`,
        );
      }
      await this.store.commit(ops);
      return created;
    });
  }

  /** Removes the address's suppressions (for one domain, or all); the number removed, 404 if none. */
  async remove(accountId: string, email: string, domain?: string): Promise<number> {
    const address = email.toLowerCase();
    const name = domain === undefined ? undefined : normalizeDomain(domain);
    const candidates = (await this.repo.forEmail(accountId, address)).filter((s) => name === undefined || s.domain === name);
    const removed = await this.deleteUnderLocks(candidates);
    if (removed === 0) throw notFound(name === undefined ? `no suppression found for ${address}` : `no suppression found for ${address} on ${name}`);
    return removed;
  }

  /**
   * Removes every suppression of the account, or of one of its domains, except protected ones
   * (complaints): how many were removed and how many kept.
   */
  async wipe(accountId: string, domain?: string): Promise<{ removed: number; kept: number }> {
    const name = domain === undefined ? undefined : await this.ownDomain(accountId, domain);
    let removed = 0;
    let kept = 0;
    for (;;) {
      const batch = await this.repo.some(accountId, name, BATCH, kept);
      if (batch.length === 0) return { removed, kept };
      const keep = batch.filter(isProtected);
      kept += keep.length;
      removed += await this.deleteUnderLocks(batch.filter((s) => !isProtected(s)));
    }
  }

  /**
   * A complaint (feedback-loop report) about mail to `email` from `domain`: a protected
   * suppression (never removed by a wipe, kept for ten years) and its `suppression.created`,
   * replacing any earlier suppression of the key. Null when a protected one is there already.
   */
  async complaint(accountId: string, email: string, domain: string, reason: string): Promise<SuppressionRecord | null> {
    return this.guard(accountId, email, domain, async (stored) => {
      const now = this.clock.now();
      if (stored && isProtected(stored) && this.inForce(stored, now)) return null;
      const record = newRecord(accountId, email.toLowerCase(), domain, reason.slice(0, 255), 'complaint', now, now + COMPLAINT_SUPPRESSION_DAYS * DAY_MS);
      await this.store.commit([...this.repo.put(record, stored), ...this.announce(record)]);
      return record;
    });
  }

  /**
   * Runs `fn` with the stored suppression for this key (if any, in force or expired) while
   * holding the key's lock; `fn` commits, and may include `automatic()`'s ops in its batch.
   */
  guard<T>(accountId: string, email: string, domain: string, fn: (stored: SuppressionRecord | undefined) => Promise<T>): Promise<T> {
    return this.locks.run(lockKey(accountId, email.toLowerCase(), domain), async () => fn(await this.repo.get(accountId, email, domain)));
  }

  /** Whether a stored suppression is in force at `now`. */
  inForce(record: SuppressionRecord | undefined, now: number): boolean {
    return record !== undefined && Date.parse(record.expiresAt) > now;
  }

  /**
   * The ops of an automatic suppression (30 days) and its event, replacing an expired `previous`
   * with its index entries; call under `guard`.
   */
  automatic(
    accountId: string,
    email: string,
    domain: string,
    reason: string,
    source: 'bounce' | 'failure',
    now: number,
    previous?: SuppressionRecord,
  ): WriteOp[] {
    const record = newRecord(accountId, email.toLowerCase(), domain, reason.slice(0, 255), source, now, now + AUTOMATIC_SUPPRESSION_DAYS * DAY_MS);
    return [...this.repo.put(record, previous), ...this.announce(record)];
  }

  /** Drops suppressions whose expiry passed; the number dropped. */
  async purgeExpired(): Promise<number> {
    let removed = 0;
    for (;;) {
      const batch = await this.repo.expired(this.clock.now(), BATCH);
      if (batch.length === 0) return removed;
      removed += await this.deleteUnderLocks(batch);
    }
  }

  private async deleteUnderLocks(records: SuppressionRecord[]): Promise<number> {
    return this.locks.runAll(
      records.map((s) => lockKey(s.accountId, s.email, s.domain)),
      async () => {
        const ops: WriteOp[] = [];
        let count = 0;
        for (const s of records) {
          const current = await this.repo.get(s.accountId, s.email, s.domain);
          if (current?.id !== s.id) continue;
          ops.push(...this.repo.delete(current));
          count++;
        }
        if (ops.length > 0) await this.store.commit(ops);
        return count;
      },
    );
  }

  private announce(s: SuppressionRecord): WriteOp[] {
    return this.events.record({
      type: 'suppression.created',
      accountId: s.accountId,
      data: { account_id: s.accountId, recipient: s.email, created_at: s.createdAt, expires_at: s.expiresAt, reason: s.reason, sending_domain: s.domain },
    });
  }

  private async ownDomain(accountId: string, name: string, missing: (message: string) => Error = notFound): Promise<string> {
    const domain = await this.domains.getByName(normalizeDomain(name));
    if (!domain || domain.accountId !== accountId) throw missing(`domain ${normalizeDomain(name)} is not a domain of this account`);
    return domain.name;
  }

  private async allDomains(accountId: string): Promise<string[]> {
    const names: string[] = [];
    for await (const domain of everyItem((req) => this.domains.list(accountId, undefined, req))) names.push(domain.name);
    return names;
  }
}

function newRecord(
  accountId: string,
  email: string,
  domain: string,
  reason: string,
  source: SuppressionRecord['source'],
  now: number,
  expiresAt: number,
): SuppressionRecord {
  return { v: 1, id: newIdAt(now), accountId, email, domain, reason, source, createdAt: iso(now), expiresAt: iso(expiresAt) };
}

/** Complaints keep the address suppressed for ten years. */
const COMPLAINT_SUPPRESSION_DAYS = 3650;

/** Protected: made by a complaint (or the legacy reason of one); a wipe keeps it. */
export function isProtected(s: SuppressionRecord): boolean {
  return s.source === 'complaint' || s.reason === 'FBL Abuse Report';
}

const lockKey = (accountId: string, email: string, domain: string) => `${accountId}:${email}:${domain}`;
