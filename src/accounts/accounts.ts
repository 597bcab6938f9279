import type { AccountsRepo } from '../store/accounts-repo.ts';
import type { AccountRecord, MemberRecord, MemberRole, UserRecord } from '../store/records.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { Store } from '../store/store.ts';
import { badRequest, conflict, forbidden, notFound } from '../util/errors.ts';
import { newId } from '../util/ids.ts';
import { KeyedMutex } from '../util/keyed-mutex.ts';
import { isEmailAddress } from '../util/email.ts';
import { isPrintable } from '../util/text.ts';
import { iso, type Clock } from '../util/time.ts';

export interface NewAccount {
  name: string;
  website: string;
  ownerEmail: string;
  ownerName?: string;
  parentAccountId?: string | null;
}

export type AccountPatch = Partial<
  Pick<
    AccountRecord,
    | 'name'
    | 'website'
    | 'about'
    | 'trackOpens'
    | 'trackClicks'
    | 'rejectBadRecipients'
    | 'rejectMistypedRecipients'
    | 'messageMetadataRetention'
    | 'messageDataRetention'
    | 'monthlyCredit'
    | 'deliveryPool'
  >
>;

/** Defaults of a new account: no tracking, 30 days of metadata, 7 days of content. */
const ACCOUNT_DEFAULTS = {
  about: '',
  trackOpens: false,
  trackClicks: false,
  rejectBadRecipients: false,
  rejectMistypedRecipients: false,
  messageMetadataRetention: 30,
  messageDataRetention: 7,
} as const;

export class Accounts {
  private readonly mutex = new KeyedMutex();

  constructor(
    private readonly store: Store,
    private readonly repo: AccountsRepo,
    private readonly clock: Clock,
  ) {}

  get(id: string): Promise<AccountRecord | undefined> {
    return this.repo.getAccount(id);
  }

  async require(id: string): Promise<AccountRecord> {
    const account = await this.repo.getAccount(id);
    if (!account) throw notFound('account not found');
    return account;
  }

  list(): Promise<AccountRecord[]> {
    return this.repo.listAccounts();
  }

  hasAny(): Promise<boolean> {
    return this.repo.hasAnyAccount();
  }

  /** Creates the account, its owner user (or reuses the user with that email) and the membership. */
  async create(input: NewAccount): Promise<AccountRecord> {
    return this.mutex.run(`user:${input.ownerEmail.toLowerCase()}`, async () => {
      const { account, ops } = await this.prepareCreate(input);
      await this.store.commit(ops);
      return account;
    });
  }

  /** The records of a new account as write ops, for a caller that commits them with other writes. */
  async prepareCreate(input: NewAccount): Promise<{ account: AccountRecord; ops: WriteOp[] }> {
    checkNewAccount(input);
    const now = iso(this.clock.now());
    const existing = await this.repo.getUserByEmail(input.ownerEmail);
    const owner: UserRecord = existing ?? {
      v: 1,
      id: newId(),
      email: input.ownerEmail.toLowerCase(),
      name: input.ownerName ?? '',
      createdAt: now,
    };
    const account: AccountRecord = {
      v: 1,
      id: newId(),
      parentAccountId: input.parentAccountId ?? null,
      name: input.name.trim(),
      website: input.website,
      ...ACCOUNT_DEFAULTS,
      ownerId: owner.id,
      status: 'active',
      createdAt: now,
      updatedAt: now,
    };
    const member: MemberRecord = { v: 1, accountId: account.id, userId: owner.id, role: 'Administrator', createdAt: now, updatedAt: now };
    return {
      account,
      ops: [...(existing ? [] : this.repo.putUser(owner)), ...this.repo.putAccount(account), this.repo.putMember(member)],
    };
  }

  /**
   * Runs `fn` under the lock of the account's family (a top-level account and its sub accounts):
   * every rewrite of an account record happens there, so a status cascade and an update of one
   * of its accounts never undo each other.
   */
  async inFamily<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const account = await this.require(id);
    return this.mutex.run(`family:${account.parentAccountId ?? account.id}`, fn);
  }

  /**
   * The records of a new sub account of `parent` (checked by the caller): owned by the parent's
   * owner without a membership of its own (member_count counts direct members only).
   */
  prepareSubAccount(parent: AccountRecord, input: { name: string; website: string; monthlyCredit: number }): { account: AccountRecord; ops: WriteOp[] } {
    const name = input.name.trim();
    if (name.length === 0 || name.length > 255) throw badRequest('name must be 1 to 255 characters');
    if (!isPrintable(name)) throw badRequest('name must not contain control characters');
    const now = iso(this.clock.now());
    const account: AccountRecord = {
      v: 1,
      id: newId(),
      parentAccountId: parent.id,
      name,
      website: input.website,
      ...ACCOUNT_DEFAULTS,
      ownerId: parent.ownerId,
      // A parent that is suspended has no key to ask with; the operator's store is the exception.
      status: parent.status === 'active' ? 'active' : 'parent-suspended',
      monthlyCredit: input.monthlyCredit,
      createdAt: now,
      updatedAt: now,
    };
    return { account, ops: this.repo.putAccount(account) };
  }

  async update(id: string, patch: AccountPatch): Promise<AccountRecord> {
    return this.inFamily(id, async () => this.rewrite(await this.require(id), patch));
  }

  /** The operator's setting of the header From its SMTP mail may have (AccountRecord.smtpHeaderFrom). */
  async setSmtpHeaderFrom(id: string, value: 'own' | 'any'): Promise<AccountRecord> {
    return this.inFamily(id, async () => {
      const updated: AccountRecord = { ...(await this.require(id)), smtpHeaderFrom: value, updatedAt: iso(this.clock.now()) };
      await this.store.commit(this.repo.putAccount(updated));
      return updated;
    });
  }

  /** Writes `account` with `patch` applied; the caller holds the family's lock (inFamily) and read `account` under it. */
  async rewrite(account: AccountRecord, patch: AccountPatch): Promise<AccountRecord> {
    const updated: AccountRecord = { ...account, ...patch, updatedAt: iso(this.clock.now()) };
    await this.store.commit(this.repo.putAccount(updated));
    return updated;
  }

  async listMembers(accountId: string): Promise<MemberRecord[]> {
    return this.repo.listMembers(accountId);
  }

  /** Adds a user (found by email, or created) to the account with a role; 409 if already a member. */
  async addMember(accountId: string, input: { email: string; name?: string; role: MemberRole }): Promise<MemberRecord> {
    // A user's name is a name like an account's or a key's label: no control characters.
    if (input.name !== undefined && !isPrintable(input.name)) throw badRequest('name must not contain control characters');
    return this.mutex.run(`user:${input.email.toLowerCase()}`, async () => {
      await this.require(accountId);
      const now = iso(this.clock.now());
      const existing = await this.repo.getUserByEmail(input.email);
      if (existing && (await this.repo.getMember(accountId, existing.id))) {
        throw conflict('user is already a member of this account');
      }
      const user: UserRecord = existing ?? { v: 1, id: newId(), email: input.email, name: input.name ?? '', createdAt: now };
      const member: MemberRecord = { v: 1, accountId, userId: user.id, role: input.role, createdAt: now, updatedAt: now };
      await this.store.commit([...(existing ? [] : this.repo.putUser(user)), this.repo.putMember(member)]);
      return member;
    });
  }

  async removeMember(accountId: string, userId: string): Promise<void> {
    const account = await this.require(accountId);
    if (account.ownerId === userId) throw forbidden('the account owner cannot be removed');
    const member = await this.repo.getMember(accountId, userId);
    if (!member) throw notFound('member not found');
    await this.store.commit([this.repo.deleteMember(accountId, userId)]);
  }
}

/** The same rules for every way in (API, CLI, bootstrap), so no record breaks the API's shapes. */
function checkNewAccount(input: NewAccount): void {
  const name = input.name.trim();
  if (name.length === 0 || name.length > 255) throw badRequest('account name must be 1 to 255 characters');
  if (!isPrintable(name)) throw badRequest('account name must not contain control characters');
  if (!isHttpUrl(input.website)) throw badRequest(`website must be an http(s) URL, got "${input.website}"`);
  if (!isEmailAddress(input.ownerEmail)) throw badRequest(`owner email "${input.ownerEmail}" is not an email address`);
}

export function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname.length > 0 && text.length <= 255;
  } catch {
    return false;
  }
}
