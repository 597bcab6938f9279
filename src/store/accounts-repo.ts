import type { WriteOp } from './group-commit.ts';
import { readPage, type Page, type PageRequest } from './page.ts';
import type { AccountRecord, MemberRecord, UserRecord } from './records.ts';
import type { Store } from './store.ts';

/** Accounts, users and memberships. */
export class AccountsRepo {
  constructor(private readonly store: Store) {}

  getAccount(id: string): Promise<AccountRecord | undefined> {
    return this.store.get<AccountRecord>('accounts', id);
  }

  async listAccounts(limit = 1000): Promise<AccountRecord[]> {
    return (await this.store.families.accounts.values({ limit }).all()) as AccountRecord[];
  }

  async hasAnyAccount(): Promise<boolean> {
    return (await this.store.families.accounts.keys({ limit: 1 }).all()).length > 0;
  }

  /**
   * The account record, and for a sub account its entry under its parent: `<parent>:l:<id>` while
   * it lives, `<parent>:d:<id>` once deleted (kept for the period's usage).
   */
  putAccount(account: AccountRecord): WriteOp[] {
    const ops: WriteOp[] = [{ type: 'put', family: 'accounts', key: account.id, value: account }];
    const parent = account.parentAccountId;
    if (parent) {
      const [now, before] = account.status === 'deleted' ? ['d', 'l'] : ['l', 'd'];
      ops.push(
        { type: 'del', family: 'accountsByParent', key: `${parent}:${before}:${account.id}` },
        { type: 'put', family: 'accountsByParent', key: `${parent}:${now}:${account.id}`, value: account.id },
      );
    }
    return ops;
  }

  /** One page of a parent's sub accounts that are not deleted, in creation order (ids are time-sortable). */
  liveChildIds(parentId: string, page: PageRequest): Promise<Page<string>> {
    return readPage<string>(this.store.families.accountsByParent, `${parentId}:l:`, page);
  }

  /** Every sub account id of a parent, deleted ones too. */
  async allChildIds(parentId: string): Promise<string[]> {
    const prefix = `${parentId}:`;
    return (await this.store.families.accountsByParent.values({ gt: prefix, lt: `${prefix}\xff` }).all()) as string[];
  }

  getUser(id: string): Promise<UserRecord | undefined> {
    return this.store.get<UserRecord>('users', id);
  }

  async getUserByEmail(email: string): Promise<UserRecord | undefined> {
    const id = await this.store.get<string>('usersByEmail', email.toLowerCase());
    return id === undefined ? undefined : this.getUser(id);
  }

  putUser(user: UserRecord): WriteOp[] {
    return [
      { type: 'put', family: 'users', key: user.id, value: user },
      { type: 'put', family: 'usersByEmail', key: user.email.toLowerCase(), value: user.id },
    ];
  }

  getMember(accountId: string, userId: string): Promise<MemberRecord | undefined> {
    return this.store.get<MemberRecord>('members', memberKey(accountId, userId));
  }

  async listMembers(accountId: string): Promise<MemberRecord[]> {
    const prefix = `${accountId}:`;
    return (await this.store.families.members.values({ gt: prefix, lt: `${prefix}\xff` }).all()) as MemberRecord[];
  }

  putMember(member: MemberRecord): WriteOp {
    return { type: 'put', family: 'members', key: memberKey(member.accountId, member.userId), value: member };
  }

  deleteMember(accountId: string, userId: string): WriteOp {
    return { type: 'del', family: 'members', key: memberKey(accountId, userId) };
  }
}

function memberKey(accountId: string, userId: string): string {
  return `${accountId}:${userId}`;
}
