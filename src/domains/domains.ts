import type { DomainOwnership } from '../accounts/scopes.ts';
import type { ApiKeysRepo } from '../store/api-keys-repo.ts';
import type { DomainsRepo } from '../store/domains-repo.ts';
import type { WriteOp } from '../store/group-commit.ts';
import { everyItem, type Page, type PageRequest } from '../store/page.ts';
import type { DkimKeyRecord, DomainRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { isLabel, isValidDomain, normalizeDomain } from '../util/domain-name.ts';
import { isMailboxAddress } from '../util/email.ts';
import { badRequest, conflict, notFound } from '../util/errors.ts';
import { newId } from '../util/ids.ts';
import type { KeyedMutex } from '../util/keyed-mutex.ts';
import { iso, type Clock } from '../util/time.ts';
import { DkimKeyError, type DkimKeyStore } from './dkim-keys.ts';
import { ed25519Selector, newSelector, newSlot, removeSlot, SELECTOR } from './slots.ts';

export interface DomainDefaults {
  trackingSubdomain: string;
  returnPathSubdomain: string;
  subscriptionSubdomain: string;
  mediaSubdomain: string;
  ed25519: boolean;
}

export interface DomainSettings {
  trackingSubdomain?: string;
  returnPathSubdomain?: string;
  subscriptionSubdomain?: string;
  mediaSubdomain?: string;
  dkimRotationIntervalDays?: number | null;
  /** On create: null or "" → a generated selector. On update: null → unchanged, "" → clear the override. */
  dkimSelector?: string | null;
  dsnRecipient?: string | null;
}

export interface NewDomain extends DomainSettings {
  name: string;
  dkimPrivateKey?: string;
}

export const INVALID_DOMAIN = 'invalid domain name, please provider a valid fully qualified domain name.';

/** Which record must be unpublished for a subdomain to change: once seen in DNS it is locked. */
const SUBDOMAIN_LOCKS = { trackingSubdomain: 'tracking', returnPathSubdomain: 'return_path' } as const;

/**
 * The domains of accounts: names unique server-wide, DKIM keys generated on creation, settings
 * that lock once DNS depends on them.
 */
export class Domains {
  constructor(
    private readonly store: Store,
    private readonly repo: DomainsRepo,
    private readonly apiKeysRepo: ApiKeysRepo,
    private readonly keys: DkimKeyStore,
    private readonly mutex: KeyedMutex,
    /** The API keys' locks: scope removal on delete must not race a key's own update. */
    private readonly keyLocks: KeyedMutex,
    private readonly clock: Clock,
    private readonly defaults: DomainDefaults,
  ) {}

  /** Scope checks ask this: the id of `name` when the account owns it. */
  readonly ownership: DomainOwnership = async (accountId, name) => {
    const domain = await this.repo.getByName(normalizeDomain(name));
    return domain && domain.accountId === accountId ? domain.id : null;
  };

  async create(accountId: string, input: NewDomain): Promise<DomainRecord> {
    const name = normalizeDomain(input.name);
    if (!isValidDomain(name)) throw badRequest(INVALID_DOMAIN);
    checkSettings(input);
    return this.mutex.run(`domain-name:${name}`, async () => {
      if (await this.repo.getByName(name)) throw conflict('domain already exists');
      const now = iso(this.clock.now());
      const id = newId();
      const override = input.dkimSelector?.trim() ? input.dkimSelector.trim().toLowerCase() : null;
      const interval = input.dkimRotationIntervalDays ?? null;
      let active;
      let standby = null;
      try {
        active = await newSlot(this.keys, id, override ?? newSelector(this.clock.now()), this.defaults.ed25519, now, input.dkimPrivateKey);
        if (interval !== null) standby = await newSlot(this.keys, id, newSelector(this.clock.now()), this.defaults.ed25519, now);
      } catch (err) {
        await this.keys.removeDomain(id);
        if (err instanceof DkimKeyError) throw badRequest(err.message);
        throw err;
      }
      active.activatedAt = now;
      const domain: DomainRecord = {
        v: 1,
        id,
        accountId,
        name,
        trackingSubdomain: input.trackingSubdomain ?? this.defaults.trackingSubdomain,
        returnPathSubdomain: input.returnPathSubdomain ?? this.defaults.returnPathSubdomain,
        subscriptionSubdomain: input.subscriptionSubdomain ?? this.defaults.subscriptionSubdomain,
        mediaSubdomain: input.mediaSubdomain ?? this.defaults.mediaSubdomain,
        dkimRotationIntervalDays: interval,
        dkimSelectorOverride: override,
        dsnRecipient: input.dsnRecipient ?? null,
        dkim: { active, standby, retired: [] },
        dns: { checkedAt: null, propagated: {}, valid: false, everValid: false },
        createdAt: now,
        updatedAt: now,
      };
      try {
        await this.store.commit(this.repo.put(domain));
      } catch (err) {
        await this.keys.removeDomain(id);
        throw err;
      }
      return domain;
    });
  }

  list(accountId: string, dnsValid: boolean | undefined, page: PageRequest): Promise<Page<DomainRecord>> {
    return this.repo.list(accountId, dnsValid, page);
  }

  /** Any account's domain by name (operator tools). */
  async byName(name: string): Promise<DomainRecord> {
    const domain = await this.repo.getByName(normalizeDomain(name));
    if (!domain) throw notFound(`domain ${normalizeDomain(name)} not found`);
    return domain;
  }

  /** The account's domain by name, or undefined (also for another account's domain). */
  async find(accountId: string, name: string): Promise<DomainRecord | undefined> {
    const domain = await this.repo.getByName(normalizeDomain(name));
    return domain && domain.accountId === accountId ? domain : undefined;
  }

  /** The account's domain by name; another account's domain is not found, as an unknown one. */
  async get(accountId: string, name: string): Promise<DomainRecord> {
    if (!isValidDomain(normalizeDomain(name))) throw badRequest(INVALID_DOMAIN);
    const domain = await this.repo.getByName(normalizeDomain(name));
    if (!domain || domain.accountId !== accountId) throw notFound('domain not found');
    return domain;
  }

  /** Runs `fn` on the current record under the domain's lock and commits what it returns. */
  async mutate(
    accountId: string,
    name: string,
    fn: (domain: DomainRecord) => Promise<{ domain: DomainRecord; ops?: WriteOp[]; after?: () => Promise<void> }>,
  ): Promise<DomainRecord> {
    const { id } = await this.get(accountId, name);
    return this.mutex.run(`domain:${id}`, async () => {
      const current = await this.get(accountId, name);
      const { domain, ops = [], after } = await fn(current);
      await this.store.commit([...this.repo.put(domain, current), ...ops]);
      await after?.();
      return domain;
    });
  }

  /**
   * The operator vouches for the domain's DNS where it cannot be looked up (a laptop, a network
   * without public DNS): the domain counts as valid, marked as verified by hand, until `clear`.
   * Only the operator's command sets it; no API call and no default does.
   */
  async verifyByHand(accountId: string, name: string, by: string, clear = false): Promise<DomainRecord> {
    return this.mutate(accountId, name, async (current) => {
      const at = iso(this.clock.now());
      const dns = clear ? { ...current.dns, valid: false, byHand: null } : { ...current.dns, valid: true, everValid: true, byHand: { at, by } };
      // Cleared, the domain is invalid until its next check looks the records up again.
      return { domain: { ...current, dns, updatedAt: at } };
    });
  }

  async update(accountId: string, name: string, patch: DomainSettings): Promise<DomainRecord> {
    checkSettings(patch);
    return this.mutate(accountId, name, async (current) => {
      const next: DomainRecord = structuredClone(current);
      const cleanups: Array<() => Promise<void>> = [];
      for (const field of ['trackingSubdomain', 'returnPathSubdomain', 'subscriptionSubdomain', 'mediaSubdomain'] as const) {
        const value = patch[field];
        if (value === undefined || value === current[field]) continue;
        const lock = field in SUBDOMAIN_LOCKS ? SUBDOMAIN_LOCKS[field as keyof typeof SUBDOMAIN_LOCKS] : null;
        if (lock && current.dns.propagated[lock]) throw badRequest(`${snake(field)} is locked: its DNS record is already verified`);
        next[field] = value;
      }
      if (patch.dsnRecipient !== undefined) next.dsnRecipient = patch.dsnRecipient;
      if (patch.dkimSelector !== undefined && patch.dkimSelector !== null) {
        const removeOld = await this.changeSelector(current, next, patch.dkimSelector);
        if (removeOld) cleanups.push(removeOld);
      }
      if (patch.dkimRotationIntervalDays !== undefined && patch.dkimRotationIntervalDays !== current.dkimRotationIntervalDays) {
        next.dkimRotationIntervalDays = patch.dkimRotationIntervalDays;
        if (patch.dkimRotationIntervalDays === null && current.dkim.standby) {
          const standby = current.dkim.standby;
          next.dkim.standby = null;
          cleanups.push(() => removeSlot(this.keys, current.id, standby));
        } else if (patch.dkimRotationIntervalDays !== null && !current.dkim.standby) {
          next.dkim.standby = await newSlot(this.keys, current.id, newSelector(this.clock.now()), this.defaults.ed25519, iso(this.clock.now()));
        }
      }
      next.updatedAt = iso(this.clock.now());
      return { domain: next, after: async () => void (await Promise.all(cleanups.map((c) => c()))) };
    });
  }

  /**
   * Deletes the domain and the API-key scopes that name it in one batch, holding the locks of
   * those keys so that no concurrent key update is overwritten; then its key files.
   */
  async delete(accountId: string, name: string): Promise<DomainRecord> {
    const domain = await this.get(accountId, name);
    return this.mutex.run(`domain:${domain.id}`, async () => {
      const current = await this.get(accountId, name);
      const naming: string[] = [];
      for await (const key of everyItem((req) => this.apiKeysRepo.list(accountId, req))) {
        if (key.scopes.some((s) => s.domainId === current.id)) naming.push(key.id);
      }
      await this.keyLocks.runAll(naming, async () => {
        const ops: WriteOp[] = [...this.repo.delete(current)];
        // Re-read under the locks: only keys whose lock is held are rewritten.
        for (const id of naming) {
          const key = await this.apiKeysRepo.get(accountId, id);
          if (key) ops.push(this.apiKeysRepo.update({ ...key, scopes: key.scopes.filter((s) => s.domainId !== current.id) }));
        }
        await this.store.commit(ops);
      });
      await this.keys.removeDomain(current.id);
      return current;
    });
  }

  /** The keys to sign mail from `name` with, or null when no such domain exists. */
  async signingKeys(name: string): Promise<{ domainId: string; name: string; keys: DkimKeyRecord[] } | null> {
    const domain = await this.repo.getByName(normalizeDomain(name));
    return domain ? { domainId: domain.id, name: domain.name, keys: domain.dkim.active.keys } : null;
  }

  /**
   * Sets or clears (`""`) the selector override and moves the active key(s) to it. New key files
   * are written before the commit; the caller removes the old ones after it (the returned cleanup).
   */
  private async changeSelector(current: DomainRecord, next: DomainRecord, requested: string): Promise<(() => Promise<void>) | null> {
    const wanted = requested.trim() ? requested.trim().toLowerCase() : null;
    if (wanted === current.dkimSelectorOverride) return null;
    if (current.dns.everValid || current.dkim.retired.length > 0) {
      throw badRequest('dkim_selector is locked: the domain has verified DNS records or has rotated keys');
    }
    next.dkimSelectorOverride = wanted;
    const active = current.dkim.active;
    const rsa = active.keys.find((k) => k.algorithm === 'rsa')!;
    const selector = wanted ?? (rsa.selector === current.dkimSelectorOverride ? newSelector(this.clock.now()) : rsa.selector);
    if (selector === rsa.selector) return null;
    const renames = active.keys.map((key) => ({ from: key.selector, to: key.algorithm === 'rsa' ? selector : ed25519Selector(selector) }));
    const taken = new Set([...active.keys, ...(current.dkim.standby?.keys ?? [])].map((k) => k.selector));
    if (renames.some((r) => taken.has(r.to))) throw badRequest(`dkim_selector ${selector} is in use by another key of this domain`);
    await this.keys.copy(current.id, renames);
    next.dkim.active.keys = active.keys.map((key, i) => ({ ...key, selector: renames[i]!.to }));
    for (const key of active.keys) delete next.dns.propagated[`dkim:${key.selector}`];
    return async () => {
      for (const { from } of renames) await this.keys.remove(current.id, from);
    };
  }
}

function checkSettings(input: DomainSettings): void {
  for (const field of ['trackingSubdomain', 'returnPathSubdomain', 'subscriptionSubdomain', 'mediaSubdomain'] as const) {
    const value = input[field];
    if (value !== undefined && !isLabel(value)) {
      throw badRequest(`${snake(field)} must be a single DNS label (a-z, 0-9, -)`);
    }
  }
  const selector = input.dkimSelector?.trim().toLowerCase();
  if (selector && !SELECTOR.test(selector)) {
    throw badRequest('dkim_selector must be a single DNS label of 1 to 62 characters (a-z, 0-9, -), not starting or ending with -');
  }
  const interval = input.dkimRotationIntervalDays;
  if (interval !== undefined && interval !== null && (!Number.isInteger(interval) || interval < 1 || interval > 365)) {
    throw badRequest('dkim_rotation_interval_days must be a whole number of days from 1 to 365');
  }
  // DSNs go there as RCPT TO and To: a plain mailbox address, nothing a header could misread.
  if (input.dsnRecipient && !isMailboxAddress(input.dsnRecipient)) throw badRequest('dsn_recipient must be an email address');
}

function snake(field: string): string {
  return field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}
