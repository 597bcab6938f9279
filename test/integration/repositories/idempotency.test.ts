import { expect } from 'chai';
import { IdempotencyRepo } from '../../../src/store/idempotency-repo.ts';
import type { IdempotencyRecord } from '../../../src/store/records.ts';
import { newId } from '../../../src/util/ids.ts';
import { timeKey } from '../../../src/util/time.ts';
import { openTestStore, TEST_BACKEND, type TestStore } from '../../helpers/backend.ts';

function record(accountId: string, key: string, expiresAt: number, fields: Partial<IdempotencyRecord> = {}): IdempotencyRecord {
  return { v: 1, accountId, key, fingerprint: 'f', state: 'in_progress', expiresAt, response: null, ...fields };
}

/** IdempotencyRepo as src/store/README.md lists it, on this run's backend. */
describe(`idempotency repository (${TEST_BACKEND})`, () => {
  let opened: TestStore;
  let repo: IdempotencyRepo;
  before(async () => {
    opened = await openTestStore();
    repo = new IdempotencyRepo(opened.store);
  });
  after(() => opened?.close());

  it("saves a record under the account and the client's key (any text), completes and removes it", async () => {
    const acct = newId();
    const key = 'order-1 \u0000 ✓ '.repeat(15);
    const started = record(acct, key, 1_000);
    await repo.save(started);
    expect(await repo.get(acct, key)).to.deep.equal(started);
    expect(await repo.get(newId(), key)).to.equal(undefined);
    const done = record(acct, key, 2_000, { state: 'completed', response: { status: 201, body: '{}', encrypted: false } });
    await repo.save(done, started);
    expect(await repo.get(acct, key)).to.deep.equal(done);
    await repo.remove(done);
    expect(await repo.get(acct, key)).to.equal(undefined);
  });

  it('lists expired entries in expiry order up to a limit, a stale entry without its record, and drops it', async () => {
    const acct = newId();
    // Before every other test's expiry: the expiry index is one range for all accounts.
    const [a, b, c] = [record(acct, 'a', 30), record(acct, 'b', 10), record(acct, 'c', 20)];
    for (const r of [a, b, c]) await repo.save(r);
    const renewed = record(acct, 'c', 500);
    await repo.save(renewed, c);
    // An entry whose record is gone (written by hand: the repository never leaves one itself).
    await opened.store.commit([{ type: 'put', family: 'idempotencyByExpiry', key: `${timeKey(15)}:${acct}:gone`, value: `${acct}:gone` }]);
    const expired = await repo.expired(100, 10);
    expect(expired.map((e) => e.record?.key)).to.deep.equal(['b', undefined, 'a']);
    expect(await repo.expired(100, 1)).to.have.length(1);
    await repo.dropIndexEntry(expired[1]!.indexKey);
    expect((await repo.expired(100, 10)).map((e) => e.record?.key)).to.deep.equal(['b', 'a']);
    expect(await repo.get(acct, 'c')).to.deep.equal(renewed);
  });
});
