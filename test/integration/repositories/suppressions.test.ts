import { expect } from 'chai';
import type { SuppressionRecord } from '../../../src/store/records.ts';
import { SuppressionsRepo } from '../../../src/store/suppressions-repo.ts';
import { newIdAt } from '../../../src/util/ids.ts';
import { openTestStore, TEST_BACKEND, type TestStore } from '../../helpers/backend.ts';

const T0 = Date.parse('2026-11-21T12:00:00.000Z');
const DAY = 86_400_000;

function suppression(accountId: string, email: string, domain: string, createdMs: number, expiresMs = createdMs + 30 * DAY): SuppressionRecord {
  return {
    v: 1,
    id: newIdAt(createdMs),
    accountId,
    email: email.toLowerCase(),
    domain,
    reason: 'test',
    source: 'api',
    createdAt: new Date(createdMs).toISOString(),
    expiresAt: new Date(expiresMs).toISOString(),
  };
}

/** SuppressionsRepo as src/store/README.md lists it, on this run's backend. */
describe(`suppressions repository (${TEST_BACKEND})`, () => {
  let opened: TestStore;
  let repo: SuppressionsRepo;
  let account = 0;
  /** An account of its own per test: expiry is read across accounts, the rest within one. */
  const nextAccount = () => `acct-${++account}-${Date.now()}`;
  before(async () => {
    opened = await openTestStore();
    repo = new SuppressionsRepo(opened.store);
  });
  after(() => opened?.close());

  it('finds a record by account, address (any case) and domain, stored before or after the filter was built', async () => {
    const acct = nextAccount();
    const early = suppression(acct, 'Early@X.test', 'example.com', T0);
    await opened.store.commit(repo.put(early));
    // A new repository builds its filter of stored keys from the store.
    const fresh = new SuppressionsRepo(opened.store);
    expect(await fresh.get(acct, 'EARLY@x.test', 'example.com')).to.deep.equal(early);
    await fresh.settled();
    expect(await fresh.get(acct, 'early@x.test', 'example.com')).to.deep.equal(early);
    expect(await fresh.get(acct, 'early@x.test', 'other.com')).to.equal(undefined);
    expect(await fresh.get(acct, 'nobody@x.test', 'example.com')).to.equal(undefined);
    const late = suppression(acct, 'late@x.test', 'example.com', T0 + 1);
    await opened.store.commit(fresh.put(late));
    expect(await fresh.get(acct, 'late@x.test', 'example.com')).to.deep.equal(late);
  });

  it('lists an address for every domain, and keys it safely whatever its text', async () => {
    const acct = nextAccount();
    const odd = 'a\u0000b\ud800@x.test';
    const made = [suppression(acct, 'both@x.test', 'a.com', T0), suppression(acct, 'both@x.test', 'b.com', T0 + 1), suppression(acct, odd, 'a.com', T0 + 2)];
    await opened.store.commit(made.flatMap((s) => repo.put(s)));
    expect(await repo.forEmail(acct, 'BOTH@x.test')).to.deep.equal(made.slice(0, 2));
    expect((await repo.forEmail(acct, odd)).map((s) => s.id)).to.deep.equal([made[2]!.id]);
    expect((await repo.get(acct, odd, 'a.com'))?.id).to.equal(made[2]!.id);
  });

  it('lists newest first, page by page both ways, filtered by address, domain, creation window and being in force', async () => {
    const acct = nextAccount();
    const made = [
      suppression(acct, 'one@x.test', 'a.com', T0),
      suppression(acct, 'two@x.test', 'b.com', T0 + 1000),
      suppression(acct, 'one@x.test', 'b.com', T0 + 2000, T0 + DAY),
      suppression(acct, 'three@x.test', 'a.com', T0 + 3000),
    ];
    await opened.store.commit([...made.flatMap((s) => repo.put(s)), ...repo.put(suppression(nextAccount(), 'one@x.test', 'a.com', T0))]);
    const ids = (list: SuppressionRecord[]) => list.map((s) => s.id);
    const newest = [...made].reverse();
    expect(ids((await repo.list(acct, {}, { limit: 10 })).items)).to.deep.equal(ids(newest));
    const first = await repo.list(acct, {}, { limit: 3 });
    expect(ids(first.items)).to.deep.equal(ids(newest.slice(0, 3)));
    expect(first.hasNext).to.equal(true);
    const older = await repo.list(acct, {}, { limit: 3, after: first.keys.at(-1)! });
    expect(ids(older.items)).to.deep.equal(ids(newest.slice(3)));
    expect(older).to.include({ hasNext: false, hasPrevious: true });
    const newer = await repo.list(acct, {}, { limit: 2, before: older.keys[0]! });
    expect(ids(newer.items)).to.deep.equal(ids(newest.slice(1, 3)));
    expect(newer.hasPrevious).to.equal(true);

    expect(ids((await repo.list(acct, { email: 'ONE@x.test' }, { limit: 10 })).items)).to.deep.equal(ids([made[2]!, made[0]!]));
    expect(ids((await repo.list(acct, { domain: 'b.com' }, { limit: 10 })).items)).to.deep.equal(ids([made[2]!, made[1]!]));
    expect(ids((await repo.list(acct, { fromMs: T0 + 1000, toMs: T0 + 2000 }, { limit: 10 })).items)).to.deep.equal(ids([made[2]!, made[1]!]));
    expect(ids((await repo.list(acct, { activeAt: T0 + 2 * DAY }, { limit: 10 })).items)).to.deep.equal(ids([made[3]!, made[1]!, made[0]!]));
  });

  it("reads some of an account's or a domain's records past those skipped, and replaces or deletes a record with its index entries", async () => {
    const acct = nextAccount();
    const made = [suppression(acct, 'a@x.test', 'a.com', T0), suppression(acct, 'b@x.test', 'b.com', T0 + 1), suppression(acct, 'c@x.test', 'a.com', T0 + 2)];
    await opened.store.commit(made.flatMap((s) => repo.put(s)));
    expect(await repo.some(acct, undefined, 2)).to.deep.equal(made.slice(0, 2));
    expect(await repo.some(acct, undefined, 2, 2)).to.deep.equal(made.slice(2));
    expect(await repo.some(acct, 'a.com', 10)).to.deep.equal([made[0], made[2]]);
    const renewed = { ...suppression(acct, 'a@x.test', 'a.com', T0 + 10), reason: 'again' };
    await opened.store.commit(repo.put(renewed, made[0]));
    expect(await repo.get(acct, 'a@x.test', 'a.com')).to.deep.equal(renewed);
    expect((await repo.list(acct, {}, { limit: 10 })).items.map((s) => s.id)).to.deep.equal([renewed.id, made[2]!.id, made[1]!.id]);
    await opened.store.commit(repo.delete(made[1]!));
    expect(await repo.get(acct, 'b@x.test', 'b.com')).to.equal(undefined);
    expect(await repo.some(acct, 'b.com', 10)).to.deep.equal([]);
  });

  it('finds records whose expiry passed, in expiry order, never one renewed since', async () => {
    // Far in the past, before any other test's records: the expiry index is one range for all accounts.
    const acct = nextAccount();
    const base = Date.parse('2001-01-01T00:00:00.000Z');
    const made = [
      suppression(acct, 'b@x.test', 'a.com', base, base + 2000),
      suppression(acct, 'a@x.test', 'a.com', base, base + 1000),
      suppression(acct, 'c@x.test', 'a.com', base, base + 3000),
    ];
    await opened.store.commit(made.flatMap((s) => repo.put(s)));
    expect((await repo.expired(base + 2500, 10)).map((s) => s.email)).to.deep.equal(['a@x.test', 'b@x.test']);
    expect((await repo.expired(base + 2500, 1)).map((s) => s.email)).to.deep.equal(['a@x.test']);
    const renewed = suppression(acct, 'a@x.test', 'a.com', base + 5000, T0 + DAY);
    // Stored again under its key with the old expiry entry left in place: not expired.
    await opened.store.commit([{ type: 'put', family: 'suppressions', key: `${acct}:a%40x.test:a.com`, value: renewed }]);
    expect((await repo.expired(base + 2500, 10)).map((s) => s.email)).to.deep.equal(['b@x.test']);
  });
});
