import type { AccountStatuses } from '../accounts/account-status.ts';
import type { ApiKeys } from '../accounts/api-keys.ts';
import { EVERY_GLOBAL_SCOPE } from '../accounts/scopes.ts';
import type { DnsChecker, PresentedRecord } from '../domains/dns-checker.ts';
import type { Domains } from '../domains/domains.ts';
import type { Rotator } from '../domains/rotator.ts';
import { everyItem } from '../store/page.ts';
import type { AccountRecord, ApiKeyRecord, DomainRecord } from '../store/records.ts';
import { badRequest, notFound } from '../util/errors.ts';
import { DnsUnavailableError } from '../domains/resolver.ts';
import { isUuid } from '../util/ids.ts';
import { ResourceAdmin, type ResourceAdminServices } from './resource-admin.ts';
import type {
  AccountPoolInput,
  AccountView,
  AdminOperations,
  CreatedKey,
  DomainInput,
  DomainSummary,
  DomainView,
  KeyInput,
  KeyView,
  NewAccountInput,
  NewDomainInput,
  NewKeyInput,
  RecordView,
  RotationView,
  SmtpHeaderFromInput,
  SmtpHeaderFromView,
  SuspendAccountInput,
  VerifyDomainInput,
} from './admin-protocol.ts';
import type { AccountInput } from './resource-protocol.ts';
import type { Config } from '../config/schema.ts';

/** The domain services the operator's administration works on (a Core has them all). */
export interface CoreAdminServices extends ResourceAdminServices {
  accountStatuses: AccountStatuses;
  apiKeys: ApiKeys;
  domains: Domains;
  dnsChecker: DnsChecker;
  rotator: Rotator;
  /** The delivery pools an account may be given. */
  config: Pick<Config, 'delivery'>;
}

/** What a key gets when the operator names no scope. */
export const DEFAULT_V1_SCOPES = ['messages:send:all'];

/**
 * The operator's administration over the domain services: the one implementation behind the
 * `accounts`, `keys` and `domains` commands (and, from ResourceAdmin, those of the API's
 * resources), whether the CLI opened the store or the daemon answers on its control socket. The
 * operator may grant any scope (no grantor).
 */
export class CoreAdmin extends ResourceAdmin implements AdminOperations {
  constructor(private readonly s: CoreAdminServices) {
    super(s);
  }

  async createAccount(input: NewAccountInput): Promise<AccountView> {
    return account(await this.s.accounts.create({ name: input.name, website: input.website, ownerEmail: input.owner_email }));
  }

  async listAccounts(): Promise<{ accounts: AccountView[] }> {
    return { accounts: (await this.s.accounts.list()).map(account) };
  }

  async suspendAccount(input: SuspendAccountInput): Promise<AccountView> {
    return account(await this.s.accountStatuses.suspend(await this.account(input.account), input.reason, 'operator'));
  }

  async unsuspendAccount(input: AccountInput): Promise<AccountView> {
    return account(await this.s.accountStatuses.unsuspend(await this.account(input.account), 'operator'));
  }

  async setSmtpHeaderFrom(input: SmtpHeaderFromInput): Promise<SmtpHeaderFromView> {
    const value = input.smtp_header_from;
    if (value !== 'own' && value !== 'any') throw badRequest(`"${value}" is neither own nor any`);
    const updated = await this.s.accounts.setSmtpHeaderFrom(await this.account(input.account), value);
    return { id: updated.id, smtp_header_from: updated.smtpHeaderFrom ?? 'own' };
  }

  /** The account's delivery pool (delivery.pools), or back to the configured one (null); in the store, so every node and every start has it. */
  async setAccountPool(input: AccountPoolInput): Promise<AccountView> {
    const id = await this.account(input.account);
    const { pool } = input;
    if (pool !== null && !Object.hasOwn(this.s.config.delivery.pools, pool)) {
      const known = Object.keys(this.s.config.delivery.pools);
      throw badRequest(`no pool "${pool.slice(0, 100)}" in delivery.pools (${known.length > 0 ? `pools: ${known.join(', ')}` : 'none is configured'})`);
    }
    return account(await this.s.accounts.update(id, { deliveryPool: pool }));
  }

  async createKey(input: NewKeyInput): Promise<CreatedKey> {
    const id = await this.account(input.account);
    const defaults = input.v1 ? DEFAULT_V1_SCOPES : EVERY_GLOBAL_SCOPE;
    const { key, secret } = await this.s.apiKeys.create(id, {
      label: input.label,
      scopes: input.scopes.length > 0 ? input.scopes : defaults,
      ipAllowList: input.ip_allow_list,
      kind: input.v1 ? 'v1' : 'v2',
    });
    return { key: apiKey(key), secret };
  }

  async listKeys(input: AccountInput): Promise<{ keys: KeyView[] }> {
    const id = await this.account(input.account);
    const keys: KeyView[] = [];
    for await (const k of everyItem((req) => this.s.apiKeys.list(id, req))) keys.push(apiKey(k));
    return { keys };
  }

  async deleteKey(input: KeyInput): Promise<KeyView> {
    const id = await this.account(input.account);
    return apiKey(await this.s.apiKeys.delete(id, uuid(input.key, '--key', 'a key id')));
  }

  async addDomain(input: NewDomainInput): Promise<DomainView> {
    const id = await this.account(input.account);
    if (input.rotation_days !== undefined && !Number.isInteger(input.rotation_days)) {
      throw badRequest(`--rotation-days: "${input.rotation_days}" is not a whole number`);
    }
    const domain = await this.s.domains.create(id, {
      name: input.name,
      ...(input.rotation_days !== undefined ? { dkimRotationIntervalDays: input.rotation_days } : {}),
      ...(input.selector !== undefined ? { dkimSelector: input.selector } : {}),
    });
    return this.domain(domain);
  }

  async listDomains(input: AccountInput): Promise<{ domains: DomainSummary[] }> {
    const id = await this.account(input.account);
    const domains: DomainSummary[] = [];
    for await (const d of everyItem((req) => this.s.domains.list(id, undefined, req)))
      domains.push({ id: d.id, name: d.name, dns_valid: d.dns.valid, by_hand: Boolean(d.dns.byHand) });
    return { domains };
  }

  async checkDomain(input: DomainInput): Promise<DomainView> {
    const domain = await this.s.domains.byName(input.name);
    const checked = await this.s.dnsChecker.check(domain).catch((err: unknown) => {
      if (err instanceof DnsUnavailableError) throw badRequest(`DNS could not be asked: ${err.detail}; check dns.servers`);
      throw err;
    });
    if (!checked) throw notFound(`domain ${input.name} not found`);
    return this.domain(checked);
  }

  async rotateDkim(input: DomainInput): Promise<RotationView> {
    const { domain, decision } = await this.s.rotator.rotate(await this.s.domains.byName(input.name), true);
    const view = this.domain(domain);
    const standby = new Set(domain.dkim.standby?.keys.map((k) => `dkim:${k.selector}`) ?? []);
    return {
      outcome: decision.kind === 'rotate' ? 'rotated' : decision.kind,
      domain: view,
      active_selectors: domain.dkim.active.keys.map((k) => k.selector),
      previous_published_until: decision.kind === 'rotate' ? (domain.dkim.retired.at(-1)?.publishUntil ?? null) : null,
      standby_records: view.records.filter((r) => standby.has(r.key)),
    };
  }

  async verifyDomain(input: VerifyDomainInput): Promise<DomainView> {
    const domain = await this.s.domains.byName(input.name);
    return this.domain(await this.s.domains.verifyByHand(domain.accountId, domain.name, 'operator (postilion domains verify)', input.clear));
  }

  private domain(d: DomainRecord): DomainView {
    return {
      id: d.id,
      name: d.name,
      account_id: d.accountId,
      verified_by_hand: d.dns.byHand ?? null,
      by_hand: Boolean(d.dns.byHand),
      dns_valid: d.dns.valid,
      dns_checked_at: d.dns.checkedAt,
      records: this.s.dnsChecker.records(d).map(record),
    };
  }
}

function uuid(value: string, option: string, what: string): string {
  if (!isUuid(value)) throw badRequest(`${option}: "${value}" is not ${what}`);
  return value.toLowerCase();
}

const account = (a: AccountRecord): AccountView => ({
  id: a.id,
  name: a.name,
  status: a.status,
  parent_account_id: a.parentAccountId,
  suspension: a.suspension ?? null,
  delivery_pool: a.deliveryPool ?? null,
});

const apiKey = (k: ApiKeyRecord): KeyView => ({
  id: k.id,
  account_id: k.accountId,
  label: k.label,
  kind: k.kind,
  scopes: k.scopes.map((s) => s.scope),
  ip_allow_list: k.ipAllowList,
});

const record = (r: PresentedRecord): RecordView => ({
  key: r.key,
  type: r.type,
  host: r.host,
  content: r.content,
  required: r.required,
  label: r.label,
  published: r.propagated,
});
