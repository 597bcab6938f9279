import type { AccountsRepo } from '../store/accounts-repo.ts';
import type { DomainsRepo } from '../store/domains-repo.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { Page, PageRequest } from '../store/page.ts';
import type { AccountRecord, ApiKeyRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { isValidDomain, normalizeDomain } from '../util/domain-name.ts';
import { badRequest, conflict, forbidden, notFound } from '../util/errors.ts';
import { isUuid } from '../util/ids.ts';
import type { AccountStatuses } from './account-status.ts';
import type { AccountPatch, Accounts } from './accounts.ts';
import type { ApiKeyPatch, ApiKeys } from './api-keys.ts';

/** Sub accounts one parent may have, deleted ones included (each is read whole by usage and a suspension's cascade). */
export const MAX_SUB_ACCOUNTS = 10_000;
export const MAX_MONTHLY_CREDIT = 1_000_000_000;

export interface NewSubAccount {
  name: string;
  website: string;
  monthlyCredit?: number | undefined;
}

export interface SubAccountPatch {
  name?: string | undefined;
  website?: string | undefined;
  monthlyCredit?: number | undefined;
}

/** What the API shows of a sub account beyond its record. */
export interface SubAccountFigures {
  domainCount: number;
  memberCount: number;
  lastActivityAt: string | null;
}

/** Scopes a sub account's key can never hold (the sub-account ones): sub accounts have no sub accounts of their own. */
const PARENT_ONLY = /^sub-account(?:s|-api-keys):/;

/**
 * A parent's sub accounts (reference-api §10): full accounts of their own (domains, keys,
 * members, suppressions, sending) created and managed by one top-level account. One level only:
 * a sub account has no sub accounts. The parent manages its sub accounts' API keys with the
 * operator's authority in the child (any scope valid for the child, no self-lockout guard), but
 * never hands a child a sub-account scope.
 */
export class SubAccounts {
  constructor(
    private readonly store: Store,
    private readonly accounts: Accounts,
    private readonly statuses: AccountStatuses,
    private readonly repo: AccountsRepo,
    private readonly domains: DomainsRepo,
    private readonly messages: MessagesRepo,
    private readonly apiKeys: ApiKeys,
  ) {}

  /** 403 unless the account is a top-level one (one level of sub accounts). */
  mayHaveChildren(account: AccountRecord): void {
    mayHaveChildren(account);
  }

  async create(parent: AccountRecord, input: NewSubAccount): Promise<AccountRecord> {
    mayHaveChildren(parent);
    const website = subAccountWebsite(input.website);
    const credit = monthlyCredit(input.monthlyCredit ?? 0);
    return this.accounts.inFamily(parent.id, async () => {
      if ((await this.repo.allChildIds(parent.id)).length >= MAX_SUB_ACCOUNTS) {
        throw forbidden(`an account may have at most ${MAX_SUB_ACCOUNTS} sub accounts`);
      }
      const current = await this.accounts.require(parent.id);
      const { account, ops } = this.accounts.prepareSubAccount(current, { name: input.name, website, monthlyCredit: credit });
      await this.store.commit(ops);
      return account;
    });
  }

  /** One page of the parent's sub accounts that are not deleted, in creation order. */
  async list(parent: AccountRecord, req: PageRequest): Promise<Page<AccountRecord>> {
    mayHaveChildren(parent);
    const ids = await this.repo.liveChildIds(parent.id, req);
    const records = await Promise.all(ids.items.map((id) => this.repo.getAccount(id)));
    return { ...ids, items: records.filter((a): a is AccountRecord => a !== undefined) };
  }

  /** The parent's sub account, deleted ones too (status `deleted`); 404 for anything else. */
  async get(parent: AccountRecord, id: string): Promise<AccountRecord> {
    mayHaveChildren(parent);
    const child = isUuid(id) ? await this.repo.getAccount(id.toLowerCase()) : undefined;
    if (!child || child.parentAccountId !== parent.id) throw notFound('sub account not found');
    return child;
  }

  async update(parent: AccountRecord, id: string, patch: SubAccountPatch): Promise<AccountRecord> {
    const website = patch.website === undefined ? undefined : subAccountWebsite(patch.website);
    const credit = patch.monthlyCredit === undefined ? undefined : monthlyCredit(patch.monthlyCredit);
    const name = patch.name === undefined ? undefined : patch.name.trim();
    const child = await this.live(parent, id);
    return this.accounts.inFamily(child.id, async () => {
      const current = await this.live(parent, id);
      const changes: AccountPatch = {};
      if (name !== undefined && name !== current.name) changes.name = name;
      if (website !== undefined && website !== current.website) changes.website = website;
      if (credit !== undefined && credit !== (current.monthlyCredit ?? 0)) changes.monthlyCredit = credit;
      if (Object.keys(changes).length === 0) throw badRequest('the request changes nothing: give at least one field with a new value');
      return this.accounts.rewrite(current, changes);
    });
  }

  async delete(parent: AccountRecord, id: string): Promise<AccountRecord> {
    const child = await this.get(parent, id);
    return this.statuses.delete(child.id);
  }

  async suspend(parent: AccountRecord, id: string, reason: string): Promise<AccountRecord> {
    const child = await this.live(parent, id);
    return this.statuses.suspend(child.id, reason, 'parent');
  }

  async unsuspend(parent: AccountRecord, id: string): Promise<AccountRecord> {
    const child = await this.live(parent, id);
    return this.statuses.unsuspend(child.id, 'parent');
  }

  async figures(child: AccountRecord): Promise<SubAccountFigures> {
    const [domainCount, members, newest] = await Promise.all([
      this.domains.countOfAccount(child.id),
      this.repo.listMembers(child.id),
      this.messages.newest(child.id),
    ]);
    return { domainCount, memberCount: members.length, lastActivityAt: newest?.createdAt ?? null };
  }

  // The sub account's API keys, managed by its parent.

  async listKeys(parent: AccountRecord, id: string, req: PageRequest): Promise<Page<ApiKeyRecord>> {
    const child = await this.live(parent, id);
    return this.apiKeys.list(child.id, req);
  }

  async createKey(
    parent: AccountRecord,
    id: string,
    input: { label: string; scopes: string[]; ipAllowList: string[] },
  ): Promise<{ key: ApiKeyRecord; secret: string }> {
    const child = await this.live(parent, id);
    childScopes(input.scopes);
    return this.apiKeys.create(child.id, { label: input.label, scopes: input.scopes, ipAllowList: input.ipAllowList });
  }

  async getKey(parent: AccountRecord, id: string, keyId: string): Promise<ApiKeyRecord> {
    const child = await this.live(parent, id);
    return this.apiKeys.get(child.id, keyId);
  }

  /** No self-lockout guard: the parent's key is never the key it changes. */
  async updateKey(parent: AccountRecord, id: string, keyId: string, patch: ApiKeyPatch): Promise<ApiKeyRecord> {
    const child = await this.live(parent, id);
    if (patch.scopes !== undefined) childScopes(patch.scopes);
    return this.apiKeys.update(child.id, keyId, patch, null);
  }

  async deleteKey(parent: AccountRecord, id: string, keyId: string): Promise<ApiKeyRecord> {
    const child = await this.live(parent, id);
    return this.apiKeys.delete(child.id, keyId);
  }

  /** The parent's sub account, not deleted (409 when it is). */
  private async live(parent: AccountRecord, id: string): Promise<AccountRecord> {
    const child = await this.get(parent, id);
    if (child.status === 'deleted') throw conflict(`sub account ${child.id} is deleted`);
    return child;
  }
}

function mayHaveChildren(account: AccountRecord): void {
  if (account.parentAccountId !== null) throw forbidden('a sub account cannot have sub accounts of its own');
}

function childScopes(scopes: string[]): void {
  const refused = scopes.find((s) => PARENT_ONLY.test(s.trim().toLowerCase()));
  if (refused !== undefined) throw badRequest(`scope "${refused}" cannot be granted to a sub account's key: sub accounts have no sub accounts`);
}

/**
 * A sub account's website: a domain name (the contract's `fqdn`), or an http(s) URL reduced to
 * its host. Stored as `https://<host>` like any account's website; shown as the host.
 */
export function subAccountWebsite(text: string): string {
  let host = text.trim();
  if (/^https?:\/\//i.test(host)) {
    try {
      host = new URL(host).hostname;
    } catch {
      throw badRequest('website must be a domain name or an http(s) URL');
    }
  }
  host = normalizeDomain(host);
  if (host.length > 253 || !isValidDomain(host)) throw badRequest(`website must be a domain name of at most 253 characters, got "${text.slice(0, 255)}"`);
  return `https://${host}`;
}

export function websiteHost(website: string): string {
  try {
    return new URL(website).hostname;
  } catch {
    return website;
  }
}

function monthlyCredit(value: number): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > MAX_MONTHLY_CREDIT)
    throw badRequest(`monthly_credit must be a whole number from 0 to ${MAX_MONTHLY_CREDIT}`);
  return value;
}
