import { expect } from 'chai';
import { DashboardSessionsRepo, tokenHash, type DashboardSessionRecord } from '../../../src/store/dashboard-sessions-repo.ts';
import { newId } from '../../../src/util/ids.ts';
import { onPostgres, openTestStore, TEST_BACKEND, type TestStore } from '../../helpers/backend.ts';

function session(expiresAt: number, fields: Partial<DashboardSessionRecord> = {}): DashboardSessionRecord {
  return { v: 1, id: tokenHash(newId()), kind: 'account', keyId: newId(), accountId: newId(), csrfToken: 'c', createdAt: 0, expiresAt, ...fields };
}

/** DashboardSessionsRepo as src/store/README.md lists it, on this run's backend. */
describe(`dashboard sessions repository (${TEST_BACKEND})`, () => {
  let opened: TestStore;
  let repo: DashboardSessionsRepo;
  beforeEach(async () => {
    opened = await openTestStore();
    repo = new DashboardSessionsRepo(opened.store);
  });
  afterEach(() => opened?.close());

  it('keeps a session by its id until it expires or is revoked', async () => {
    const live = session(1_000);
    await repo.create(live);
    expect(await repo.get(live.id, 999)).to.deep.equal(live);
    expect(await repo.get(live.id, 1_000)).to.equal(undefined);
    expect(await repo.get(tokenHash('other'), 0)).to.equal(undefined);
    await repo.revoke(live.id);
    expect(await repo.get(live.id, 0)).to.equal(undefined);
  });

  it('revokes every session, and sweeps only what expired (sessions and links)', async () => {
    const [a, b, c] = [session(10), session(20), session(5_000)];
    for (const s of [a, b, c]) await repo.create(s);
    await repo.createLoginLink(tokenHash('old'), 15);
    await repo.createLoginLink(tokenHash('new'), 5_000);
    expect(await repo.sweep(100)).to.equal(3);
    expect(await repo.get(c.id, 100)).to.deep.equal(c);
    expect(await repo.consumeLoginLink(tokenHash('new'), 100)).to.equal(true);
    expect(await repo.revokeAll()).to.equal(1);
    expect(await repo.get(c.id, 100)).to.equal(undefined);
  });

  it('takes a sign-in link once, never after it expired, never when unknown, and once when raced', async () => {
    await repo.createLoginLink(tokenHash('t1'), 1_000);
    expect(await repo.consumeLoginLink(tokenHash('t1'), 500)).to.equal(true);
    expect(await repo.consumeLoginLink(tokenHash('t1'), 500)).to.equal(false);
    await repo.createLoginLink(tokenHash('t2'), 1_000);
    expect(await repo.consumeLoginLink(tokenHash('t2'), 1_000)).to.equal(false);
    expect(await repo.consumeLoginLink(tokenHash('t3'), 0)).to.equal(false);
    await repo.createLoginLink(tokenHash('t4'), 1_000);
    const raced = await Promise.all([1, 2, 3, 4].map(() => repo.consumeLoginLink(tokenHash('t4'), 10)));
    expect(raced.filter(Boolean)).to.have.length(1);
  });

  it('lets one of two nodes take a link when both try at once (the database checks the unused record)', async function () {
    // One node's LevelDB has one writer, whose repository takes a link once (above); the check of
    // `expected` between writers is PostgreSQL's.
    if (!onPostgres) this.skip();
    const nodes = [repo, new DashboardSessionsRepo(opened.store), new DashboardSessionsRepo(opened.store)];
    await repo.createLoginLink(tokenHash('t5'), 1_000);
    const raced = await Promise.all(nodes.map((node) => node.consumeLoginLink(tokenHash('t5'), 10)));
    expect(raced.filter(Boolean)).to.have.length(1);
  });
});
