import type { EventRecorder } from '../events/recorder.ts';
import type { DomainsRepo } from '../store/domains-repo.ts';
import type { DomainRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { AppError, notFound } from '../util/errors.ts';
import type { KeyedMutex } from '../util/keyed-mutex.ts';
import { iso, type Clock } from '../util/time.ts';
import { checkRecords, inspectRecords, type RecordInspection } from './checks.ts';
import { expectedRecords, type ExpectedRecord, type Identity } from './records.ts';
import { DnsUnavailableError, type DnsResolver } from './resolver.ts';

export interface PresentedRecord extends ExpectedRecord {
  propagated: boolean;
}

/** A record as DNS holds it at this moment (nothing stored). */
export type InspectedRecord = ExpectedRecord & RecordInspection;

/**
 * Looks a domain's records up and stores what it found. A required record that was published
 * and no longer is records a `domain.dns_error` event in the same batch.
 */
export class DnsChecker {
  constructor(
    private readonly store: Store,
    private readonly repo: DomainsRepo,
    private readonly resolver: DnsResolver,
    private readonly events: EventRecorder,
    private readonly mutex: KeyedMutex,
    private readonly clock: Clock,
    private identity: Identity,
    private readonly cacheMs: number,
  ) {}

  /** The records to publish, with what the last check found. */
  records(domain: DomainRecord): PresentedRecord[] {
    return expectedRecords(domain, this.identity).map((r) => ({ ...r, propagated: domain.dns.propagated[r.key] === true }));
  }

  /** Looks each record up now and says what is found at its name; stores nothing (the dashboard's domain page). */
  async inspect(domain: DomainRecord): Promise<{ checkedAt: string; records: InspectedRecord[] }> {
    const identity = this.identity;
    const records = expectedRecords(domain, identity);
    const checkedAt = iso(this.clock.now());
    const found = await inspectRecords(this.resolver, records, identity);
    return { checkedAt, records: records.map((r) => ({ ...r, ...(found.get(r.key) ?? { status: 'unknown' }) })) };
  }

  /** check-dns: a fresh check, or the last result when it is younger than the cache window. */
  async checkNow(domain: DomainRecord): Promise<DomainRecord> {
    const last = domain.dns.checkedAt === null ? null : Date.parse(domain.dns.checkedAt);
    if (last !== null && this.clock.now() - last < this.cacheMs) return domain;
    let checked: DomainRecord | null;
    try {
      checked = await this.check(domain);
    } catch (err) {
      // The tenant gets the error code; the resolver asked is the operator's (log, CLI).
      if (err instanceof DnsUnavailableError) throw new AppError(503, `DNS is unavailable right now (${err.code}), please try again later`);
      throw err;
    }
    if (checked) return checked;
    // Deleted while it was being looked up.
    throw notFound('domain not found');
  }

  /**
   * Re-checks one domain; null when it was deleted meanwhile. When no lookup could be answered,
   * throws the DnsUnavailableError (the stored state is kept).
   */
  async check(domain: DomainRecord): Promise<DomainRecord | null> {
    const records = expectedRecords(domain, this.identity);
    const found = await checkRecords(this.resolver, records, this.identity);
    return this.mutex.run(`domain:${domain.id}`, async () => {
      const current = await this.repo.get(domain.id);
      if (!current) return null;
      const now = iso(this.clock.now());
      const propagated: Record<string, boolean> = {};
      const asked = new Map(records.map((r) => [r.key, `${r.type} ${r.host} ${r.content}`]));
      const expected = expectedRecords(current, this.identity);
      for (const r of expected) {
        const previous = current.dns.propagated[r.key] ?? false;
        // Only answers to the question as the record now stands count (it may have changed
        // while DNS was asked); a lookup that failed keeps the last known state.
        propagated[r.key] = asked.get(r.key) === `${r.type} ${r.host} ${r.content}` ? (found.get(r.key) ?? previous) : previous;
      }
      const required = expected.filter((r) => r.required);
      // Verified by hand, the domain stays valid (what was found is still recorded, per record).
      const byHand = current.dns.byHand ?? null;
      const valid = byHand !== null || required.every((r) => propagated[r.key]);
      const next: DomainRecord = {
        ...current,
        dns: { checkedAt: now, propagated, valid, everValid: current.dns.everValid || valid, byHand },
      };
      const broke = byHand === null && required.some((r) => current.dns.propagated[r.key] === true && !propagated[r.key]);
      const ops = this.repo.put(next, current);
      if (broke) {
        const dkimValid = required.filter((r) => r.check.kind === 'dkim').every((r) => propagated[r.key]);
        ops.push(
          ...this.events.record({
            type: 'domain.dns_error',
            accountId: current.accountId,
            data: {
              domain: current.name,
              account_id: current.accountId,
              spf_valid: propagated.spf === true,
              dkim_valid: dkimValid,
              dmarc_valid: propagated.dmarc === true,
              dns_last_checked_at: now,
            },
          }),
        );
      }
      await this.store.commit(ops);
      return next;
    });
  }

  /** The periodic job: every domain, one at a time. Returns how many changed validity. */
  async checkAll(onError: (domain: DomainRecord, err: unknown) => void): Promise<number> {
    let changed = 0;
    for await (const domain of this.repo.all()) {
      try {
        const next = await this.check(domain);
        if (next && next.dns.valid !== domain.dns.valid) changed++;
      } catch (err) {
        onError(domain, err instanceof DnsUnavailableError ? err.detail : err);
      }
    }
    return changed;
  }

  setIdentity(identity: Identity): void {
    this.identity = identity;
  }
}
