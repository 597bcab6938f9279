import { expect } from 'chai';
import { AccountsRepo } from '../../../src/store/accounts-repo.ts';
import { ApiKeysRepo } from '../../../src/store/api-keys-repo.ts';
import type { AccountRecord, ApiKeyRecord, MemberRecord, UserRecord } from '../../../src/store/records.ts';
import { newId } from '../../../src/util/ids.ts';
import { openTestStore, TEST_BACKEND, type TestStore } from '../../helpers/backend.ts';

const AT = '2026-11-21T12:00:00.000Z';

function account(fields: Partial<AccountRecord> = {}): AccountRecord {
  return {
    v: 1,
    id: newId(),
    parentAccountId: null,
    name: 'acme',
    website: '',
    about: '',
    trackOpens: false,
    trackClicks: false,
    rejectBadRecipients: false,
    rejectMistypedRecipients: false,
    messageMetadataRetention: 30,
    messageDataRetention: 7,
    ownerId: newId(),
    status: 'active',
    createdAt: AT,
    updatedAt: AT,
    ...fields,
  };
}

function apiKey(accountId: string, fields: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  const id = newId();
  return {
    v: 1,
    id,
    accountId,
    kind: 'v2',
    label: 'k',
    publicKey: `pk-${id}`,
    secretHash: `hash-${id}`,
    scopes: [],
    ipAllowList: [],
    createdAt: AT,
    updatedAt: AT,
    lastUsedAt: null,
    ...fields,
  };
}

/** AccountsRepo and ApiKeysRepo as src/store/README.md lists them, on this run's backend. */
describe(`accounts and API keys repositories (${TEST_BACKEND})`, () => {
  let opened: TestStore;
  let accounts: AccountsRepo;
  let keys: ApiKeysRepo;
  before(async () => {
    opened = await openTestStore();
    accounts = new AccountsRepo(opened.store);
    keys = new ApiKeysRepo(opened.store);
  });
  after(() => opened?.close());

  describe('AccountsRepo', () => {
    it('has no account in a new store, then lists accounts in key order up to a limit', async () => {
      expect(await accounts.hasAnyAccount()).to.equal(false);
      expect(await accounts.listAccounts()).to.deep.equal([]);
      const made = [account(), account(), account()];
      await opened.store.commit(made.flatMap((a) => accounts.putAccount(a)));
      expect(await accounts.hasAnyAccount()).to.equal(true);
      expect((await accounts.listAccounts()).map((a) => a.id)).to.deep.equal(made.map((a) => a.id).sort());
      expect(await accounts.listAccounts(2)).to.have.length(2);
      expect(await accounts.getAccount(made[1]!.id)).to.deep.equal(made[1]);
      expect(await accounts.getAccount(newId())).to.equal(undefined);
    });

    it("keeps a parent's sub accounts in creation order, live ones apart from deleted ones", async () => {
      const parent = account();
      const children = [account({ parentAccountId: parent.id }), account({ parentAccountId: parent.id }), account({ parentAccountId: parent.id })];
      await opened.store.commit([parent, ...children].flatMap((a) => accounts.putAccount(a)));
      const ids = children.map((c) => c.id);
      expect((await accounts.liveChildIds(parent.id, { limit: 10 })).items).to.deep.equal(ids);
      const first = await accounts.liveChildIds(parent.id, { limit: 2 });
      expect(first).to.include({ hasNext: true, hasPrevious: false });
      expect(first.items).to.deep.equal(ids.slice(0, 2));
      const second = await accounts.liveChildIds(parent.id, { limit: 2, after: first.keys.at(-1)! });
      expect(second).to.deep.include({ items: ids.slice(2), hasNext: false, hasPrevious: true });
      expect((await accounts.liveChildIds(parent.id, { limit: 2, before: second.keys[0]! })).items).to.deep.equal(ids.slice(0, 2));

      await opened.store.commit(accounts.putAccount({ ...children[1]!, status: 'deleted', deletedAt: AT }));
      expect((await accounts.liveChildIds(parent.id, { limit: 10 })).items).to.deep.equal([ids[0], ids[2]]);
      expect((await accounts.allChildIds(parent.id)).sort()).to.deep.equal([...ids].sort());
    });

    it('finds a user by email whatever its case, and lists and removes members', async () => {
      const user: UserRecord = { v: 1, id: newId(), email: 'Owner@Example.COM', name: 'Owner', createdAt: AT };
      const acct = account();
      const member = (userId: string): MemberRecord => ({ v: 1, accountId: acct.id, userId, role: 'Developer', createdAt: AT, updatedAt: AT });
      const other = newId();
      await opened.store.commit([...accounts.putUser(user), accounts.putMember(member(user.id)), accounts.putMember(member(other))]);
      expect(await accounts.getUserByEmail('owner@example.com')).to.deep.equal(user);
      expect(await accounts.getUserByEmail('OWNER@EXAMPLE.COM')).to.deep.equal(user);
      expect(await accounts.getUserByEmail('nobody@example.com')).to.equal(undefined);
      expect(await accounts.getMember(acct.id, user.id)).to.deep.equal(member(user.id));
      expect((await accounts.listMembers(acct.id)).map((m) => m.userId)).to.have.members([user.id, other]);
      await opened.store.commit([accounts.deleteMember(acct.id, other)]);
      expect((await accounts.listMembers(acct.id)).map((m) => m.userId)).to.deep.equal([user.id]);
      expect(await accounts.getMember(acct.id, other)).to.equal(undefined);
    });
  });

  describe('ApiKeysRepo', () => {
    it('finds a key by id and by its secret hash; deleted, by neither', async () => {
      const acct = newId();
      const key = apiKey(acct);
      await opened.store.commit(keys.create(key));
      expect(await keys.get(acct, key.id)).to.deep.equal(key);
      expect(await keys.findBySecretHash(key.secretHash)).to.deep.equal(key);
      expect(await keys.findBySecretHash('hash-unknown')).to.equal(undefined);
      await opened.store.commit(keys.delete(key));
      expect(await keys.get(acct, key.id)).to.equal(undefined);
      expect(await keys.findBySecretHash(key.secretHash)).to.equal(undefined);
    });

    it("lists an account's keys in creation order, page by page, and no other account's", async () => {
      const acct = newId();
      const made = [apiKey(acct), apiKey(acct), apiKey(acct)];
      await opened.store.commit([...made.flatMap((k) => keys.create(k)), ...keys.create(apiKey(newId()))]);
      const first = await keys.list(acct, { limit: 2 });
      expect(first.items.map((k) => k.id)).to.deep.equal(made.slice(0, 2).map((k) => k.id));
      expect(first).to.include({ hasNext: true, hasPrevious: false });
      const rest = await keys.list(acct, { limit: 2, after: first.keys.at(-1)! });
      expect(rest.items.map((k) => k.id)).to.deep.equal([made[2]!.id]);
      expect(rest).to.include({ hasNext: false, hasPrevious: true });
    });

    it('updates a record; a touch is read back at once, and a later update supersedes it', async () => {
      const acct = newId();
      const key = apiKey(acct);
      await opened.store.commit(keys.create(key));
      await opened.store.commit([keys.update({ ...key, label: 'renamed' })]);
      expect((await keys.findBySecretHash(key.secretHash))?.label).to.equal('renamed');
      const current = (await keys.get(acct, key.id))!;
      await keys.touch({ ...current, lastUsedAt: AT }, current);
      expect((await keys.get(acct, key.id))?.lastUsedAt).to.equal(AT);
      expect((await keys.list(acct, { limit: 10 })).items[0]?.lastUsedAt).to.equal(AT);
      await opened.store.commit([keys.update({ ...key, label: 'again', lastUsedAt: AT })]);
      opened = await opened.reopen();
      keys = new ApiKeysRepo(opened.store);
      accounts = new AccountsRepo(opened.store);
      expect(await keys.get(acct, key.id)).to.include({ label: 'again', lastUsedAt: AT });
    });
  });
});
