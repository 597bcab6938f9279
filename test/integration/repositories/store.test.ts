import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import type { Store } from '../../../src/store/store.ts';
import type { Family, WriteOp } from '../../../src/store/types.ts';
import { onPostgres, openTestStore, TEST_BACKEND, type TestStore } from '../../helpers/backend.ts';

/**
 * The store's guarantees (src/store/README.md, "How writes work") on the families every node
 * shares: what the repositories build on, the same on LevelDB and in cluster mode on PostgreSQL.
 */
describe(`store contract on the shared families (${TEST_BACKEND})`, () => {
  let opened: TestStore;
  let store: Store;
  before(async () => {
    opened = await openTestStore();
    store = opened.store;
  });
  after(() => opened?.close());

  /** Keys under a prefix of their own, so that tests never see each other's. */
  const scope = () => `${randomUUID()}:`;
  const puts = (family: Family, entries: Array<[string, unknown]>): WriteOp[] => entries.map(([key, value]) => ({ type: 'put', family, key, value }));

  it('keeps its shared families where the backend says', () => {
    expect(store.isShared('apiKeys')).to.equal(onPostgres);
    expect(store.isShared('messages')).to.equal(false);
  });

  it('lands every op of a commit, across families, and reads them back', async () => {
    const p = scope();
    await store.commit([
      ...puts('accounts', [[`${p}a`, { name: 'a' }]]),
      ...puts('apiKeysByHash', [[`${p}h`, 'ref']]),
      ...puts('suppressions', [[`${p}s`, { n: 1 }]]),
    ]);
    expect(await store.get('accounts', `${p}a`)).to.deep.equal({ name: 'a' });
    expect(await store.get('apiKeysByHash', `${p}h`)).to.equal('ref');
    expect(await store.get('suppressions', `${p}s`)).to.deep.equal({ n: 1 });
    expect(await store.get('suppressions', `${p}absent`)).to.equal(undefined);
  });

  it('writes nothing of a commit that holds an op it cannot store', async () => {
    const p = scope();
    const failed = await store
      .commit([...puts('accounts', [[`${p}a`, { name: 'a' }]]), { type: 'put', family: 'domains', key: `${p}d`, value: undefined }])
      .then(
        () => null,
        (err: unknown) => err,
      );
    expect(failed).to.be.instanceOf(Error);
    expect(await store.get('accounts', `${p}a`)).to.equal(undefined);
  });

  it('applies the last op of a key in a commit: a put then a delete leaves nothing, a delete then a put the value', async () => {
    const p = scope();
    await store.commit([...puts('webhooks', [[`${p}gone`, 1]]), { type: 'del', family: 'webhooks', key: `${p}gone` }]);
    await store.commit([{ type: 'del', family: 'webhooks', key: `${p}kept` }, ...puts('webhooks', [[`${p}kept`, 2]])]);
    expect(await store.get('webhooks', `${p}gone`)).to.equal(undefined);
    expect(await store.get('webhooks', `${p}kept`)).to.equal(2);
  });

  it('reads many keys at once in the order asked, absent keys as undefined', async () => {
    const p = scope();
    await store.commit(
      puts('domains', [
        [`${p}1`, { n: 1 }],
        [`${p}2`, { n: 2 }],
      ]),
    );
    expect(await store.getMany('domains', [`${p}2`, `${p}x`, `${p}1`, `${p}2`])).to.deep.equal([{ n: 2 }, undefined, { n: 1 }, { n: 2 }]);
    expect(await store.getMany('domains', [])).to.deep.equal([]);
  });

  it('orders keys as LevelDB does: by their UTF-8 bytes, U+0000 and U+0001 included', async () => {
    const p = scope();
    // UTF-16 order (JavaScript's <) puts U+FF5E after the emoji; byte order puts it before.
    const keys = ['b', 'B', 'a', 'a\u0000', 'a\u0001', 'a\u0001\u0002', 'a\u0000z', 'ab', '~', 'é', '中', '\uff5e', '😀', '0', ' ', 'a:b', 'a\u00ff'];
    await store.commit(
      puts(
        'routesByAccount',
        keys.map((k, i) => [p + k, i]),
      ),
    );
    const expected = [...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))).map((k) => p + k);
    // Up to the next prefix (':' + 1): every key of this one, whatever its characters.
    const range = { gt: p, lt: `${p.slice(0, -1)};` };
    expect(await store.families.routesByAccount.keys(range).all()).to.deep.equal(expected);
    expect(await store.families.routesByAccount.keys({ ...range, reverse: true }).all()).to.deep.equal([...expected].reverse());
    // Each key reads back as it was written.
    expect(
      await store.getMany(
        'routesByAccount',
        keys.map((k) => p + k),
      ),
    ).to.deep.equal(keys.map((_, i) => i));
    expect(await store.families.routesByAccount.values({ gte: `${p}a\u0000`, lte: `${p}a\u0001` }).all()).to.deep.equal([3, 6, 4]);
  });

  it('reads a range with each bound, a limit and in reverse', async () => {
    const p = scope();
    await store.commit(
      puts(
        'members',
        ['1', '2', '3', '4', '5'].map((k) => [p + k, Number(k)]),
      ),
    );
    const values = (range: object) => store.families.members.values({ gt: p, lt: `${p}\xff`, ...range }).all();
    expect(await values({})).to.deep.equal([1, 2, 3, 4, 5]);
    expect(await values({ gt: `${p}2` })).to.deep.equal([3, 4, 5]);
    expect(await values({ gte: `${p}2` })).to.deep.equal([2, 3, 4, 5]);
    expect(await values({ lt: `${p}4` })).to.deep.equal([1, 2, 3]);
    expect(await values({ lte: `${p}4` })).to.deep.equal([1, 2, 3, 4]);
    expect(await values({ limit: 2 })).to.deep.equal([1, 2]);
    expect(await values({ reverse: true, limit: 2 })).to.deep.equal([5, 4]);
    expect(await values({ gt: `${p}1`, lte: `${p}4`, reverse: true })).to.deep.equal([4, 3, 2]);
    expect(await store.families.members.iterator({ gt: `${p}3`, lt: `${p}\xff` }).all()).to.deep.equal([
      [`${p}4`, 4],
      [`${p}5`, 5],
    ]);
  });

  it('iterates a range of more than a thousand keys whole, in order, both ways, and row by row', async () => {
    const p = scope();
    const keys = Array.from({ length: 1234 }, (_, i) => `${p}${String(i).padStart(5, '0')}`);
    await store.commit(
      puts(
        'suppressionIndex',
        keys.map((k) => [k, k]),
      ),
    );
    const range = { gt: p, lt: `${p}\xff` };
    expect(await store.families.suppressionIndex.keys(range).all()).to.deep.equal(keys);
    const backwards: string[] = [];
    for await (const key of store.families.suppressionIndex.keys({ ...range, reverse: true })) backwards.push(key);
    expect(backwards).to.deep.equal([...keys].reverse());
    expect(await store.families.suppressionIndex.keys({ ...range, limit: 1001 }).all()).to.deep.equal(keys.slice(0, 1001));
    // Read row by row, then left early.
    const it = store.families.suppressionIndex.iterator(range);
    const first: string[] = [];
    for (let i = 0; i < 600; i++) first.push((await it.next())![0]);
    await it.close();
    expect(first).to.deep.equal(keys.slice(0, 600));
    const end = store.families.suppressionIndex.keys({ gt: `${p}01233`, lt: `${p}\xff` });
    expect(await end.next()).to.equal(undefined);
    await end.close();
  });

  it('serves a cached record until a commit changes or deletes it, and hands it out frozen', async () => {
    const p = scope();
    await store.commit(puts('accounts', [[`${p}a`, { name: 'old', nested: { n: 1 } }]]));
    const cached = (await store.get<{ name: string; nested: { n: number } }>('accounts', `${p}a`))!;
    expect(() => {
      cached.nested.n = 2;
    }).to.throw(TypeError);
    await store.commit(puts('accounts', [[`${p}a`, { name: 'new' }]]));
    expect(await store.get('accounts', `${p}a`)).to.deep.equal({ name: 'new' });
    await store.commit([{ type: 'del', family: 'accounts', key: `${p}a` }]);
    expect(await store.get('accounts', `${p}a`)).to.equal(undefined);
  });

  it('does not keep a value read while a write of the same key was landing', async () => {
    const p = scope();
    await store.commit(puts('apiKeys', [[`${p}k`, { name: 'old' }]]));
    const writing = store.commit(puts('apiKeys', [[`${p}k`, { name: 'new' }]]));
    const racing = store.get('apiKeys', `${p}k`);
    await Promise.all([writing, racing]);
    expect(await store.get('apiKeys', `${p}k`)).to.deep.equal({ name: 'new' });
  });

  it('tells put listeners of each landed put, after the commit, never of a failed one', async () => {
    const p = scope();
    const heard: Array<[string, unknown]> = [];
    store.onPut('smtpCredentials', (key, value) => {
      if (key.startsWith(p)) heard.push([key, value]);
    });
    const committed = store.commit(puts('smtpCredentials', [[`${p}1`, { n: 1 }]]));
    expect(heard).to.deep.equal([]);
    await committed;
    expect(heard).to.deep.equal([[`${p}1`, { n: 1 }]]);
    await store
      .commit([...puts('smtpCredentials', [[`${p}2`, { n: 2 }]]), { type: 'put', family: 'smtpCredentials', key: `${p}3`, value: undefined }])
      .catch(() => undefined);
    expect(heard).to.have.length(1);
  });

  describe('relaxed puts (an API key last-used time)', () => {
    it('are seen at once and kept across a reopen', async () => {
      const p = scope();
      await store.commit(puts('apiKeys', [[`${p}k`, { lastUsedAt: null }]]));
      expect(await store.get('apiKeys', `${p}k`)).to.deep.equal({ lastUsedAt: null });
      await store.putRelaxed('apiKeys', `${p}k`, { lastUsedAt: 'now' });
      expect(await store.get('apiKeys', `${p}k`)).to.deep.equal({ lastUsedAt: 'now' });
      expect(await store.getMany('apiKeys', [`${p}k`])).to.deep.equal([{ lastUsedAt: 'now' }]);
      expect(await store.families.apiKeys.values({ gt: p, lt: `${p}\xff` }).all()).to.deep.equal([{ lastUsedAt: 'now' }]);
      opened = await opened.reopen();
      store = opened.store;
      expect(await store.get('apiKeys', `${p}k`)).to.deep.equal({ lastUsedAt: 'now' });
    });

    it('give way to a later commit of the same key: the committed value is what stays', async () => {
      const p = scope();
      await store.commit(
        puts('apiKeys', [
          [`${p}changed`, { label: 'a', lastUsedAt: null }],
          [`${p}deleted`, { label: 'b', lastUsedAt: null }],
        ]),
      );
      await store.putRelaxed('apiKeys', `${p}changed`, { label: 'a', lastUsedAt: 'now' });
      await store.putRelaxed('apiKeys', `${p}deleted`, { label: 'b', lastUsedAt: 'now' });
      await store.commit([
        ...puts('apiKeys', [[`${p}changed`, { label: 'renamed', lastUsedAt: 'now' }]]),
        { type: 'del', family: 'apiKeys', key: `${p}deleted` },
      ]);
      expect(await store.get('apiKeys', `${p}changed`)).to.deep.equal({ label: 'renamed', lastUsedAt: 'now' });
      expect(await store.get('apiKeys', `${p}deleted`)).to.equal(undefined);
      opened = await opened.reopen();
      store = opened.store;
      expect(await store.get('apiKeys', `${p}changed`)).to.deep.equal({ label: 'renamed', lastUsedAt: 'now' });
      expect(await store.get('apiKeys', `${p}deleted`)).to.equal(undefined);
    });
  });
});
