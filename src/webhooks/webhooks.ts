import type { DomainsRepo } from '../store/domains-repo.ts';
import { pageOfItems, type Page, type PageRequest } from '../store/page.ts';
import { WEBHOOK_FLAGS, type DomainRecord, type WebhookFlag, type WebhookRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import type { WebhooksRepo } from '../store/webhooks-repo.ts';
import { checkTargetUrl, TargetRefusedError, type HostResolver } from '../delivery/http-target.ts';
import { newWebhookSecret } from '../delivery/signing.ts';
import type { Cidr } from '../util/cidr.ts';
import { isValidDomain, normalizeDomain } from '../util/domain-name.ts';
import { badRequest, conflict, forbidden, notFound } from '../util/errors.ts';
import { newId } from '../util/ids.ts';
import { KeyedMutex } from '../util/keyed-mutex.ts';
import { Lru } from '../util/lru.ts';
import type { SecretBox } from '../util/secret-box.ts';
import { isPrintable } from '../util/text.ts';
import { iso, type Clock } from '../util/time.ts';
import type { TargetCounters } from '../queue/target-counters.ts';
import type { Emitter } from '../util/signals.ts';

/**
 * What Webhooks tells, after the commit: a disabled webhook enabled again (its held deliveries
 * resume); a webhook that stops taking deliveries at its URL (disabled, deleted or moved to
 * another URL), as it was.
 */
export interface WebhookSignals {
  'webhook.enabled': WebhookRecord;
  'webhook.stopped': WebhookRecord;
}

/** Webhooks per account: the listing and the fan-out read an account's webhooks whole. */
export const MAX_WEBHOOKS_PER_ACCOUNT = 1000;
/** Accounts whose list of webhooks is kept at most (then the least recently used go). */
const ACCOUNT_LISTS_KEPT = 10_000;
/** Domains one scoped webhook may name. */
export const MAX_WEBHOOK_DOMAINS = 100;

export type WebhookFlags = Record<WebhookFlag, boolean>;

export interface NewWebhook {
  name: string;
  url: string;
  enabled: boolean;
  flags: WebhookFlags;
  scope: 'global' | 'scoped';
  /** Required (non-empty) for `scoped`; ignored for `global`. */
  domains: string[];
}

/** A partial update: absent fields are unchanged (reference-api §5.1). */
export interface WebhookChanges {
  name?: string;
  url?: string;
  enabled?: boolean;
  flags?: Partial<WebhookFlags>;
  scope?: 'global' | 'scoped';
  /** Replaces the associations when the resulting scope is `scoped`; absent keeps them. */
  domains?: string[];
}

export interface WebhookFilter {
  enabled?: boolean;
  flags?: Partial<WebhookFlags>;
}

/**
 * Whether the caller may write a webhook reaching `domain`, or (null) a global one, or a scoped
 * one left with no domain. Absent for the operator, who may do anything.
 */
export type MayWrite = (domain: string | null) => boolean;

export interface WebhookSettings {
  /** `webhooks.allow_networks`: read on every check, so a reload takes effect. */
  allowNetworks: () => readonly Cidr[];
}

/**
 * Webhook resources: CRUD for the API, and (for the fan-out and the dispatcher) an account's
 * webhooks and a webhook's secret in clear. The secret is generated here, returned once, and
 * kept sealed with its own key.
 */
export class Webhooks {
  /** Per account, the ids of its webhooks (see ofAccount). */
  private readonly accountLists = new Lru<string, string[]>(ACCOUNT_LISTS_KEPT);
  private listGeneration = 0;
  private listWrites = 0;

  constructor(
    private readonly store: Store,
    private readonly repo: WebhooksRepo,
    private readonly domains: DomainsRepo,
    private readonly box: SecretBox,
    private readonly resolver: HostResolver,
    private readonly settings: WebhookSettings,
    private readonly clock: Clock,
    private readonly counters: TargetCounters,
    private readonly signals: Emitter<WebhookSignals>,
    private readonly locks = new KeyedMutex(),
  ) {
    // Cluster mode: a webhook made or deleted on another node changes its account's list.
    store.onRemoteChange('webhooksByAccount', () => {
      this.listGeneration += 1;
      this.accountLists.clear();
    });
  }

  /** Creates a webhook; the secret is returned here and never again. */
  async create(accountId: string, input: NewWebhook, may?: MayWrite): Promise<{ webhook: WebhookRecord; secret: string }> {
    const name = checkName(input.name);
    const names = input.scope === 'scoped' ? domainNames(input.domains, true) : [];
    if (may) checkMay(may, input.scope, names, 'create');
    const domains = await this.resolveDomains(accountId, names);
    const url = await this.checkUrl(input.url);
    return this.locks.run(`account:${accountId}`, async () => {
      if ((await this.repo.countOfAccount(accountId)) >= MAX_WEBHOOKS_PER_ACCOUNT) {
        throw conflict(`an account may have at most ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks`);
      }
      const secret = newWebhookSecret();
      const now = iso(this.clock.now());
      const webhook: WebhookRecord = {
        v: 1,
        id: newId(),
        accountId,
        name,
        url,
        enabled: input.enabled,
        flags: { ...input.flags },
        scope: input.scope,
        domains,
        secret: this.box.seal(secret),
        successCount: 0,
        errorCount: 0,
        errorsSinceLastSuccess: 0,
        lastRequestAt: null,
        createdAt: now,
        updatedAt: now,
      };
      await this.changingLists(() => this.store.commit(this.repo.create(webhook)));
      return { webhook, secret };
    });
  }

  /**
   * One page of the account's webhooks matching `filter`, in creation order; with `domainNames`
   * (a domain-scoped key) only those associated with at least one of them.
   */
  async list(accountId: string, domainNames: string[] | null, filter: WebhookFilter, req: PageRequest): Promise<Page<WebhookRecord>> {
    const readable = domainNames === null ? null : new Set(domainNames.map(normalizeDomain));
    const all = await this.repo.ofAccount(accountId);
    const matching: WebhookRecord[] = [];
    for (const webhook of all) {
      if (filter.enabled !== undefined && webhook.enabled !== filter.enabled) continue;
      if (filter.flags && Object.entries(filter.flags).some(([flag, value]) => webhook.flags[flag as WebhookFlag] !== value)) continue;
      if (readable && !(await this.domainsOf(webhook)).some((d) => readable.has(d))) continue;
      matching.push(webhook);
    }
    const page = pageOfItems(matching, req);
    return { ...page, items: await Promise.all(page.items.map((w) => this.counters.overlay(w))) };
  }

  /** The account's webhook; another account's is not found, as an unknown one. */
  async get(accountId: string, id: string): Promise<WebhookRecord> {
    const webhook = await this.repo.get(id);
    if (!webhook || webhook.accountId !== accountId) throw notFound('webhook not found');
    return this.counters.overlay(webhook);
  }

  /**
   * Disables a webhook whose deliveries keep failing (its deliveries are then held); false when
   * it is gone or already disabled.
   */
  async disable(id: string): Promise<boolean> {
    return this.locks.run(`webhook:${id}`, async () => {
      const current = await this.repo.get(id);
      if (!current || !current.enabled) return false;
      await this.store.commit(this.repo.update({ ...current, enabled: false, updatedAt: iso(this.clock.now()) }));
      this.signals.emit('webhook.stopped', current);
      return true;
    });
  }

  /**
   * A partial update. The caller must be allowed to write the webhook as it is and as it will
   * be. Switching to `scoped` needs a non-empty `domains` in the same request; switching to
   * `global` drops the associations; `domains: []` on a scoped webhook clears them (it then
   * matches no event until domains are added).
   */
  async update(accountId: string, id: string, changes: WebhookChanges, may?: MayWrite): Promise<WebhookRecord> {
    const name = changes.name === undefined ? undefined : checkName(changes.name);
    const requested = changes.domains === undefined ? undefined : domainNames(changes.domains, false);
    const url = changes.url === undefined ? undefined : await this.checkUrl(changes.url);
    return this.locks.run(`webhook:${id}`, async () => {
      const current = await this.get(accountId, id);
      const scope = changes.scope ?? current.scope;
      if (scope === 'scoped' && current.scope === 'global' && (requested === undefined || requested.length === 0)) {
        throw badRequest('domains must name at least one domain when a webhook becomes scoped');
      }
      if (may) {
        checkMay(may, current.scope, await this.domainsOf(current), 'update');
      }
      let domains = current.domains;
      if (scope === 'global') domains = [];
      else if (requested !== undefined) domains = await this.resolveDomains(accountId, requested);
      if (may) {
        const reached = scope === 'scoped' && requested === undefined ? await this.domainsOf(current) : domains.map((d) => d.name);
        checkMay(may, scope, reached, 'update');
      }
      const next: WebhookRecord = {
        ...current,
        name: name ?? current.name,
        url: url ?? current.url,
        enabled: changes.enabled ?? current.enabled,
        flags: { ...current.flags, ...definedOnly(changes.flags ?? {}) },
        scope,
        domains,
        updatedAt: iso(this.clock.now()),
      };
      const enabled = next.enabled && !current.enabled;
      await this.store.commit([...this.repo.update(next), ...(enabled ? [await this.counters.resetErrors(id)] : [])]);
      if (enabled) this.signals.emit('webhook.enabled', next);
      if (current.enabled && (!next.enabled || next.url !== current.url)) this.signals.emit('webhook.stopped', current);
      return this.counters.overlay(next);
    });
  }

  /** Deletes the webhook; `may` must allow every domain it reaches (or a global one). */
  async delete(accountId: string, id: string, may?: MayWrite): Promise<WebhookRecord> {
    return this.locks.run(`webhook:${id}`, async () => {
      const webhook = await this.get(accountId, id);
      if (may) checkMay(may, webhook.scope, await this.domainsOf(webhook), 'delete');
      await this.changingLists(() => this.store.commit([...this.repo.delete(webhook), this.counters.forget(webhook.id)]));
      this.signals.emit('webhook.stopped', webhook);
      return webhook;
    });
  }

  /**
   * The names of the webhook's associated domains that still exist in its account. A deleted
   * domain drops out here (and a new domain of the same name has another id).
   */
  async domainsOf(webhook: WebhookRecord): Promise<string[]> {
    const found = await Promise.all(webhook.domains.map((d) => this.domains.get(d.id)));
    return found.filter((d): d is DomainRecord => d !== undefined && d.accountId === webhook.accountId).map((d) => d.name);
  }

  /**
   * Every webhook of the account, in creation order (the fan-out filters by flag and domain).
   * Asked for every batch of events, most often of accounts with none: which webhooks an account
   * has is kept (the records themselves are read through the store's cache, so a change to one
   * is seen at once), and forgotten whenever a webhook is created or deleted.
   */
  async ofAccount(accountId: string): Promise<WebhookRecord[]> {
    let ids = this.accountLists.get(accountId);
    if (ids === undefined) {
      const generation = this.listGeneration;
      ids = await this.repo.idsOfAccount(accountId);
      // A list read while a creation or deletion was on its way may be the old one: not kept.
      if (generation === this.listGeneration && this.listWrites === 0) this.accountLists.set(accountId, ids);
    }
    const found = await Promise.all(ids.map((id) => this.repo.get(id)));
    return found.filter((w): w is WebhookRecord => w !== undefined);
  }

  /** Runs a write that creates or deletes webhooks: the kept lists are forgotten before and after it. */
  private async changingLists<T>(write: () => Promise<T>): Promise<T> {
    this.listWrites += 1;
    this.listGeneration += 1;
    this.accountLists.clear();
    try {
      return await write();
    } finally {
      this.listWrites -= 1;
      this.listGeneration += 1;
      this.accountLists.clear();
    }
  }

  /** The secret in clear, to sign a delivery with. */
  secretOf(webhook: WebhookRecord): string {
    return this.box.open(webhook.secret);
  }

  private async checkUrl(text: string): Promise<string> {
    try {
      return (await checkTargetUrl(text, this.resolver, this.settings.allowNetworks())).href;
    } catch (err) {
      if (err instanceof TargetRefusedError) throw badRequest(err.message);
      throw err;
    }
  }

  private async resolveDomains(accountId: string, names: string[]): Promise<WebhookRecord['domains']> {
    const out: WebhookRecord['domains'] = [];
    for (const domainName of names) {
      const domain = await this.domains.getByName(domainName);
      if (!domain || domain.accountId !== accountId) throw badRequest(`domain ${domainName} is not a domain of this account`);
      out.push({ id: domain.id, name: domain.name });
    }
    return out;
  }
}

/** Writing a webhook needs `…:write:all` when it is global (or scoped to nothing), else every domain. */
function checkMay(may: MayWrite, scope: 'global' | 'scoped', domains: string[], verb: 'create' | 'update' | 'delete'): void {
  if (scope === 'global' || domains.length === 0) {
    if (!may(null)) throw forbidden(`this API key may not ${verb} webhooks that are not scoped to its domains`);
    return;
  }
  const denied = domains.find((d) => !may(d));
  if (denied !== undefined) throw forbidden(`this API key may not ${verb} webhooks of ${denied}`);
}

function checkName(text: string): string {
  const name = text.trim();
  if (name.length === 0 || name.length > 255) throw badRequest('name must be 1 to 255 characters');
  if (!isPrintable(name)) throw badRequest('name must not contain control characters');
  return name;
}

/** Normalised, valid and distinct; at least one when `required`. */
function domainNames(requested: string[], required: boolean): string[] {
  const names = [...new Set(requested.map(normalizeDomain))];
  if (required && names.length === 0) throw badRequest('domains must name at least one domain for a scoped webhook');
  if (names.length > MAX_WEBHOOK_DOMAINS) throw badRequest(`domains may name at most ${MAX_WEBHOOK_DOMAINS} domains`);
  const invalid = names.find((n) => !isValidDomain(n));
  if (invalid !== undefined) throw badRequest(`invalid domain name "${invalid}" in domains`);
  return names;
}

function definedOnly(flags: Partial<WebhookFlags>): Partial<WebhookFlags> {
  return Object.fromEntries(Object.entries(flags).filter(([flag, v]) => v !== undefined && (WEBHOOK_FLAGS as readonly string[]).includes(flag)));
}
