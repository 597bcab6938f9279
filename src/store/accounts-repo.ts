import type { WriteOp } from './group-commit.ts';
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

  putAccount(account: AccountRecord): WriteOp {
    return { type: 'put', family: 'accounts', key: account.id, value: account };
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
