import { expect } from 'chai';
import { DomainsRepo } from '../../../src/store/domains-repo.ts';
import type { DomainRecord, SmtpCredentialRecord } from '../../../src/store/records.ts';
import { SmtpCredentialsRepo } from '../../../src/store/smtp-credentials-repo.ts';
import { newId } from '../../../src/util/ids.ts';
import { openTestStore, TEST_BACKEND, type TestStore } from '../../helpers/backend.ts';

const AT = '2026-11-21T12:00:00.000Z';
const slot = { keys: [], activatedAt: null, publishUntil: null };

function domain(accountId: string, name: string, valid = false): DomainRecord {
  return {
    v: 1,
    id: newId(),
    accountId,
    name,
    trackingSubdomain: 'track',
    returnPathSubdomain: 'rp',
    subscriptionSubdomain: 'unsub',
    mediaSubdomain: 'media',
    dkimRotationIntervalDays: null,
    dkimSelectorOverride: null,
    dsnRecipient: null,
    dkim: { active: slot, standby: null, retired: [] },
    dns: { checkedAt: null, propagated: {}, valid, everValid: valid },
    createdAt: AT,
    updatedAt: AT,
  };
}

function credential(accountId: string, domains: DomainRecord[] = []): SmtpCredentialRecord {
  const id = newId();
  return {
    v: 1,
    id,
    accountId,
    name: 'relay',
    username: `user-${id}`,
    password: { scheme: 'scrypt', n: 16384, r: 8, p: 1, salt: 'c2FsdA==', hash: 'aGFzaA==' },
    sandbox: false,
    scope: domains.length > 0 ? 'scoped' : 'global',
    domains: domains.map((d) => ({ id: d.id, name: d.name })),
    createdAt: AT,
    updatedAt: AT,
  };
}

/** DomainsRepo and SmtpCredentialsRepo as src/store/README.md lists them, on this run's backend. */
describe(`domains and SMTP credentials repositories (${TEST_BACKEND})`, () => {
  let opened: TestStore;
  let domains: DomainsRepo;
  let credentials: SmtpCredentialsRepo;
  before(async () => {
    opened = await openTestStore();
    domains = new DomainsRepo(opened.store);
    credentials = new SmtpCredentialsRepo(opened.store);
  });
  after(() => opened?.close());

  describe('DomainsRepo', () => {
    it("finds a domain by id and by name, counts and lists an account's in creation order, filtered on DNS validity", async () => {
      const acct = newId();
      const made = [domain(acct, `a-${acct}.test`, true), domain(acct, `b-${acct}.test`), domain(acct, `c-${acct}.test`, true), domain(acct, `d-${acct}.test`)];
      await opened.store.commit([...made.flatMap((d) => domains.put(d)), ...domains.put(domain(newId(), `other-${acct}.test`))]);
      expect(await domains.get(made[1]!.id)).to.deep.equal(made[1]);
      expect(await domains.getByName(made[2]!.name)).to.deep.equal(made[2]);
      expect(await domains.getByName(`nothing-${acct}.test`)).to.equal(undefined);
      expect(await domains.countOfAccount(acct)).to.equal(4);
      const ids = (list: DomainRecord[]) => list.map((d) => d.id);
      expect(ids((await domains.list(acct, undefined, { limit: 10 })).items)).to.deep.equal(ids(made));
      expect(ids((await domains.list(acct, true, { limit: 10 })).items)).to.deep.equal([made[0]!.id, made[2]!.id]);
      expect(ids((await domains.list(acct, false, { limit: 10 })).items)).to.deep.equal([made[1]!.id, made[3]!.id]);

      const first = await domains.list(acct, undefined, { limit: 3 });
      expect(ids(first.items)).to.deep.equal(ids(made.slice(0, 3)));
      expect(first).to.include({ hasNext: true, hasPrevious: false });
      const last = await domains.list(acct, undefined, { limit: 3, after: first.keys.at(-1)! });
      expect(ids(last.items)).to.deep.equal([made[3]!.id]);
      expect(last).to.include({ hasNext: false, hasPrevious: true });
      const back = await domains.list(acct, undefined, { limit: 2, before: last.keys[0]! });
      expect(ids(back.items)).to.deep.equal(ids(made.slice(1, 3)));
      expect(back).to.include({ hasNext: true, hasPrevious: true });
    });

    it('moves a domain between the validity lists when its DNS becomes valid, and deletes it with its indexes', async () => {
      const acct = newId();
      const before = domain(acct, `move-${acct}.test`);
      await opened.store.commit(domains.put(before));
      const after = { ...before, dns: { ...before.dns, valid: true, everValid: true } };
      await opened.store.commit(domains.put(after, before));
      expect((await domains.list(acct, false, { limit: 10 })).items).to.deep.equal([]);
      expect((await domains.list(acct, true, { limit: 10 })).items).to.deep.equal([after]);
      expect(await domains.countOfAccount(acct)).to.equal(1);
      await opened.store.commit(domains.delete(after));
      expect(await domains.get(after.id)).to.equal(undefined);
      expect(await domains.getByName(after.name)).to.equal(undefined);
      expect(await domains.countOfAccount(acct)).to.equal(0);
    });

    it('walks every domain of every account', async () => {
      const acct = newId();
      const made = [domain(acct, `all-1-${acct}.test`), domain(newId(), `all-2-${acct}.test`)];
      await opened.store.commit(made.flatMap((d) => domains.put(d)));
      const seen: string[] = [];
      for await (const d of domains.all()) seen.push(d.id);
      expect(seen).to.include.members(made.map((d) => d.id));
    });
  });

  describe('SmtpCredentialsRepo', () => {
    it("finds a credential by id and username, and lists an account's in creation order", async () => {
      const acct = newId();
      const made = [credential(acct), credential(acct), credential(acct)];
      await opened.store.commit([...made.flatMap((c) => credentials.create(c)), ...credentials.create(credential(newId()))]);
      expect(await credentials.get(made[0]!.id)).to.deep.equal(made[0]);
      expect(await credentials.getByUsername(made[1]!.username)).to.deep.equal(made[1]);
      const first = await credentials.list(acct, { limit: 2 });
      expect(first.items).to.deep.equal(made.slice(0, 2));
      expect(first).to.include({ hasNext: true, hasPrevious: false });
      expect((await credentials.list(acct, { limit: 2, after: first.keys.at(-1)! })).items).to.deep.equal(made.slice(2));
      await opened.store.commit(credentials.delete(made[1]!));
      expect(await credentials.getByUsername(made[1]!.username)).to.equal(undefined);
      expect((await credentials.list(acct, { limit: 10 })).items).to.deep.equal([made[0], made[2]]);
    });

    it('lists the credentials of some domains in creation order, each once, page by page both ways', async () => {
      const acct = newId();
      const [x, y, z] = [domain(acct, `x-${acct}.test`), domain(acct, `y-${acct}.test`), domain(acct, `z-${acct}.test`)];
      const made = [credential(acct, [x]), credential(acct, [x, y]), credential(acct, [z]), credential(acct, [y]), credential(acct)];
      await opened.store.commit(made.flatMap((c) => credentials.create(c)));
      const ids = (list: SmtpCredentialRecord[]) => list.map((c) => c.id);
      expect(ids((await credentials.listForDomains(acct, [x.id, y.id], { limit: 10 })).items)).to.deep.equal(ids([made[0]!, made[1]!, made[3]!]));
      const first = await credentials.listForDomains(acct, [y.id, x.id, z.id], { limit: 2 });
      expect(ids(first.items)).to.deep.equal(ids(made.slice(0, 2)));
      expect(first).to.include({ hasNext: true, hasPrevious: false });
      const next = await credentials.listForDomains(acct, [y.id, x.id, z.id], { limit: 2, after: first.keys.at(-1)! });
      expect(ids(next.items)).to.deep.equal(ids(made.slice(2, 4)));
      expect(next).to.include({ hasNext: false, hasPrevious: true });
      const back = await credentials.listForDomains(acct, [y.id, x.id, z.id], { limit: 2, before: next.keys[0]! });
      expect(ids(back.items)).to.deep.equal(ids(made.slice(0, 2)));
      expect(back).to.include({ hasNext: true, hasPrevious: false });
    });
  });
});
