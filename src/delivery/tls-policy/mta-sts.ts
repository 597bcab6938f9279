import type { Logger } from 'pino';
import { DnsUnavailableError, type DnsResolver } from '../../domains/resolver.ts';
import type { MtaStsRecord, MtaStsRepo } from '../../store/mta-sts-repo.ts';
import { Lru } from '../../util/lru.ts';
import { iso, type Clock } from '../../util/time.ts';
import type { TlsFailureType } from '../tls-outcome.ts';
import { parsePolicy, stsRecordId, type MtaStsPolicy } from './mta-sts-policy.ts';
import { fetchPolicyText, PolicyFetchError, type PolicyFetchOptions } from './policy-fetch.ts';

/** A domain's policy in force: from its TXT record's `id`, until `expiresAt`. */
export interface ActivePolicy {
  id: string;
  policy: MtaStsPolicy;
  expiresAt: number;
}

/** What applies to a domain: a policy, none, or a policy announced (TXT) that could not be had. */
export type StsLookup = { kind: 'none' } | { kind: 'policy'; active: ActivePolicy } | { kind: 'unavailable'; failure: TlsFailureType; detail: string };

export interface MtaStsOptions {
  fetch: PolicyFetchOptions;
  /** How long a domain's TXT answer (and so its policy) is used before the TXT record is asked again. */
  recheckMs: number;
}

const DOMAINS_KEPT = 10_000;

/**
 * The MTA-STS policies of recipient domains (RFC 8461 §5): the `_mta-sts` TXT record is asked
 * at most once per `recheckMs` per domain; a new `id` (or no policy yet, or an expired one)
 * fetches the policy, which is kept in memory and in the store for its max_age. A policy in
 * force stays in force while the TXT record is gone or DNS fails, and when a fetch fails, until
 * it expires (§5.1). Lookups of one domain at the same time share one.
 */
export class MtaSts {
  private readonly cache = new Lru<string, { until: number; found: StsLookup; active: ActivePolicy | null }>(DOMAINS_KEPT);
  private readonly pending = new Map<string, Promise<StsLookup>>();

  constructor(
    private readonly resolver: DnsResolver,
    private readonly repo: MtaStsRepo,
    private readonly options: MtaStsOptions,
    private readonly clock: Clock,
    private readonly log: Logger | null = null,
  ) {}

  async lookup(domain: string): Promise<StsLookup> {
    const key = domain.toLowerCase();
    const cached = this.cache.get(key);
    if (cached && cached.until > this.clock.now()) return cached.found;
    const running = this.pending.get(key);
    if (running) return running;
    // Undefined: the store was not read yet for this domain (once per domain kept in memory).
    const work = this.refresh(key, cached ? cached.active : undefined).finally(() => this.pending.delete(key));
    this.pending.set(key, work);
    return work;
  }

  private async refresh(domain: string, known: ActivePolicy | null | undefined): Promise<StsLookup> {
    const now = this.clock.now();
    let active = known === undefined ? await this.stored(domain) : (known ?? undefined);
    if (active && active.expiresAt <= now) active = undefined;
    let found: StsLookup;
    let id: string | null;
    try {
      id = stsRecordId(await this.resolver.txt(`_mta-sts.${domain}`));
    } catch (err) {
      if (!(err instanceof DnsUnavailableError)) throw err;
      id = active?.id ?? null;
    }
    if (id === null || id === active?.id) {
      found = active ? { kind: 'policy', active } : { kind: 'none' };
    } else {
      const fetched = await this.fetch(domain, id, now);
      if ('policy' in fetched) active = fetched;
      found = active ? { kind: 'policy', active } : 'failure' in fetched ? fetched : { kind: 'none' };
    }
    if (found.kind === 'policy' && found.active.policy.mode === 'none') found = { kind: 'none' };
    this.cache.set(domain, { until: now + this.options.recheckMs, found, active: active ?? null });
    return found;
  }

  private async fetch(domain: string, id: string, now: number): Promise<ActivePolicy | { kind: 'unavailable'; failure: TlsFailureType; detail: string }> {
    let text: string;
    try {
      text = await fetchPolicyText(domain, this.options.fetch);
    } catch (err) {
      if (!(err instanceof PolicyFetchError)) throw err;
      this.log?.warn({ domain, err: err.message }, 'could not fetch the MTA-STS policy');
      return { kind: 'unavailable', failure: err.webpki ? 'sts-webpki-invalid' : 'sts-policy-fetch-error', detail: err.message };
    }
    let policy: MtaStsPolicy;
    try {
      policy = parsePolicy(text);
    } catch (err) {
      this.log?.warn({ domain, err: (err as Error).message }, 'the MTA-STS policy is not valid');
      return { kind: 'unavailable', failure: 'sts-policy-invalid', detail: (err as Error).message };
    }
    const active: ActivePolicy = { id, policy, expiresAt: now + policy.maxAge * 1000 };
    const record: MtaStsRecord = { version: 1, domain, id, text, fetchedAt: iso(now), expiresAt: iso(active.expiresAt) };
    try {
      await this.repo.put(record);
    } catch (err) {
      // Kept in memory all the same: the store only spares a fetch after a restart.
      this.log?.warn({ domain, err }, 'could not store the MTA-STS policy');
    }
    this.log?.info({ domain, id, mode: policy.mode, mx: policy.mx, max_age: policy.maxAge }, 'MTA-STS policy fetched');
    return active;
  }

  private async stored(domain: string): Promise<ActivePolicy | undefined> {
    const record = await this.repo.get(domain);
    if (!record) return undefined;
    try {
      return { id: record.id, policy: parsePolicy(record.text), expiresAt: Date.parse(record.expiresAt) };
    } catch {
      return undefined;
    }
  }
}
