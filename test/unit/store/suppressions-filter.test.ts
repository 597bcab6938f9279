import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../../src/store/store.ts';
import { SuppressionsRepo } from '../../../src/store/suppressions-repo.ts';
import type { SuppressionRecord } from '../../../src/store/records.ts';
import { BloomFilter } from '../../../src/util/bloom.ts';

describe('Bloom filter', () => {
  it('never denies a string added, and rarely admits one that was not', () => {
    const filter = new BloomFilter(20_000);
    for (let i = 0; i < 20_000; i++) filter.add(`account:user${i}%40example.test:example.com`);
    for (let i = 0; i < 20_000; i++) expect(filter.mayContain(`account:user${i}%40example.test:example.com`)).to.equal(true);
    let admitted = 0;
    for (let i = 0; i < 50_000; i++) if (filter.mayContain(`account:other${i}%40example.test:example.com`)) admitted += 1;
    expect(admitted / 50_000).to.be.below(0.02);
    expect(filter.size).to.equal(20_000);
  });
});

describe('Suppression lookups behind the filter', () => {
  let dir: string;
  let store: Store;
  let reads: number;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-suppressions-'));
    store = await Store.open(dir);
    reads = 0;
    const get = store.get.bind(store);
    store.get = (family, key) => {
      if (family === 'suppressions') reads += 1;
      return get(family, key);
    };
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const record = (email: string, domain = 'example.com'): SuppressionRecord => ({
    v: 1,
    id: `id-${email}`,
    accountId: 'acct',
    email,
    domain,
    reason: 'test',
    source: 'api',
    createdAt: '2026-11-21T00:00:00.000Z',
    expiresAt: '2027-11-21T00:00:00.000Z',
  });

  it('finds what was stored before it started, and reads nothing for an address on no list', async () => {
    await store.commit(new SuppressionsRepo(store).put(record('old@x.test')));
    const repo = new SuppressionsRepo(store);
    // Read while the filter is being built.
    expect((await repo.get('acct', 'OLD@x.test', 'example.com'))?.email).to.equal('old@x.test');
    await repo.settled();
    expect(reads).to.equal(1);
    expect((await repo.get('acct', 'OLD@x.test', 'example.com'))?.email).to.equal('old@x.test');
    expect(reads).to.equal(2);
    expect(await repo.get('acct', 'old@x.test', 'other.com')).to.equal(undefined);
    expect(await repo.get('acct', 'new@x.test', 'example.com')).to.equal(undefined);
    expect(reads).to.equal(2);
    await store.commit(repo.put(record('new@x.test')));
    expect((await repo.get('acct', 'new@x.test', 'example.com'))?.email).to.equal('new@x.test');
  });

  it('adds a put that lands after the scan of the store began', async () => {
    const repo = new SuppressionsRepo(store);
    await store.commit(repo.put(record('first@x.test')));
    const family = store.families.suppressions;
    const keys = family.keys.bind(family);
    let scans = 0;
    // The scan's first key is read (its snapshot taken) before the put lands: the put is not in it.
    // (The sublevel's iterator calls keys() again to open itself: that call goes through.)
    Object.assign(family, {
      keys: () => {
        if (scans++ > 0) return keys();
        return (async function* () {
          const iterator = keys();
          const first = await iterator.next();
          await store.commit(repo.put(record('during@x.test')));
          if (first !== undefined) yield first;
          yield* iterator;
        })();
      },
    });
    expect(await repo.get('acct', 'nobody@x.test', 'example.com')).to.equal(undefined);
    await repo.settled();
    expect((await repo.get('acct', 'first@x.test', 'example.com'))?.email).to.equal('first@x.test');
    expect((await repo.get('acct', 'during@x.test', 'example.com'))?.email).to.equal('during@x.test');
  });

  it('learns a key written by a relaxed put too', async () => {
    const repo = new SuppressionsRepo(store);
    expect(await repo.get('acct', 'nobody@x.test', 'example.com')).to.equal(undefined);
    await repo.settled();
    await store.putRelaxed('suppressions', 'acct:relaxed%40x.test:example.com', record('relaxed@x.test'));
    expect((await repo.get('acct', 'relaxed@x.test', 'example.com'))?.email).to.equal('relaxed@x.test');
  });

  it('reads the store while no filter could be built, and builds one when it can', async () => {
    const repo = new SuppressionsRepo(store);
    await store.commit(repo.put(record('kept@x.test')));
    const family = store.families.suppressions;
    const keys = family.keys.bind(family);
    Object.assign(family, {
      keys: () => {
        throw new Error('the store is closing');
      },
    });
    expect((await repo.get('acct', 'kept@x.test', 'example.com'))?.email).to.equal('kept@x.test');
    await repo.settled();
    expect((await repo.get('acct', 'kept@x.test', 'example.com'))?.email).to.equal('kept@x.test');
    expect(await repo.get('acct', 'other@x.test', 'example.com')).to.equal(undefined);
    expect(reads).to.equal(3);
    Object.assign(family, { keys });
    await repo.settled();
    expect(await repo.get('acct', 'another@x.test', 'example.com')).to.equal(undefined);
    await repo.settled();
    expect(await repo.get('acct', 'another@x.test', 'example.com')).to.equal(undefined);
    expect((await repo.get('acct', 'kept@x.test', 'example.com'))?.email).to.equal('kept@x.test');
    expect(reads).to.equal(5);
  });

  it('keeps every key through rebuilds, puts that land while one scans the store included', async () => {
    const repo = new SuppressionsRepo(store, 16);
    // The first build starts with this read, and the puts below land while it and later ones run.
    const first = repo.get('acct', 'nobody@x.test', 'example.com');
    const late = repo.put(record('late@x.test'));
    await Promise.all(Array.from({ length: 100 }, (_, i) => store.commit(repo.put(record(`user${i}@x.test`)))));
    expect(await first).to.equal(undefined);
    await repo.settled();
    await store.commit(late);
    expect((await repo.get('acct', 'late@x.test', 'example.com'))?.email).to.equal('late@x.test');
    for (let i = 0; i < 100; i++) expect(await repo.get('acct', `user${i}@x.test`, 'example.com'), `user${i}`).to.not.equal(undefined);
    const before = reads;
    let found = 0;
    for (let i = 0; i < 200; i++) if (await repo.get('acct', `stranger${i}@x.test`, 'example.com')) found += 1;
    expect(found).to.equal(0);
    // Reads only for the filter's rare false positives.
    expect(reads - before).to.be.below(10);
  });
});
