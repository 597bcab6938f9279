import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store, StoreLockedError } from '../../src/store/store.ts';

describe('store (real LevelDB)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-store-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('gathers concurrent commits into fewer synced batches, each caller answered after its batch', async () => {
    const store = await Store.open(dir);
    const writers = 200;
    await Promise.all(Array.from({ length: writers }, (_, i) => store.commit([{ type: 'put', family: 'meta', key: `k${i}`, value: { i } }])));
    const { batches, writes } = store.commitStats;
    expect(writes).to.equal(writers);
    expect(batches).to.be.lessThan(writers);
    for (let i = 0; i < writers; i++) expect(await store.get('meta', `k${i}`)).to.deep.equal({ i });
    await store.close();
  });

  it('applies a commit touching several families atomically and keeps it across reopen', async () => {
    const store = await Store.open(dir);
    await store.commit([
      { type: 'put', family: 'accounts', key: 'a', value: { v: 1 } },
      { type: 'put', family: 'users', key: 'u', value: { v: 1 } },
    ]);
    await store.close();
    const reopened = await Store.open(dir);
    expect(await reopened.get('accounts', 'a')).to.deep.equal({ v: 1 });
    expect(await reopened.get('users', 'u')).to.deep.equal({ v: 1 });
    expect(await reopened.get('accounts', 'u')).to.equal(undefined);
    await reopened.close();
  });

  it('refuses an unstorable value without writing it, while concurrent commits land', async () => {
    const store = await Store.open(dir);
    const results = await Promise.allSettled([
      store.commit([{ type: 'put', family: 'meta', key: 'good1', value: 1 }]),
      store.commit([
        { type: 'put', family: 'meta', key: 'half', value: 2 },
        { type: 'put', family: 'meta', key: 'bad', value: undefined },
      ]),
      store.commit([{ type: 'put', family: 'meta', key: 'good2', value: 3 }]),
    ]);
    expect(results.map((r) => r.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((results[1] as PromiseRejectedResult).reason)).to.contain('cannot store undefined under meta/bad');
    expect(await store.get('meta', 'good1')).to.equal(1);
    expect(await store.get('meta', 'good2')).to.equal(3);
    expect(await store.get('meta', 'half')).to.equal(undefined);
    await store.close();
  });

  it('keeps body bytes as raw bytes, readable through their family', async () => {
    const store = await Store.open(dir);
    const bytes = Buffer.from([0, 255, 13, 10, 0xc3, 0x28]);
    await store.commit([{ type: 'put', family: 'bodies', key: 'b:000000', value: bytes }]);
    expect(Buffer.compare((await store.families.bodies.get('b:000000')) as Buffer, bytes)).to.equal(0);
    await store.close();
  });

  it('reads several records of a family in one getMany, in the order asked, cached families too', async () => {
    const store = await Store.open(dir);
    await store.commit([
      { type: 'put', family: 'events', key: 'e1', value: { id: 'e1' } },
      { type: 'put', family: 'events', key: 'e2', value: { id: 'e2' } },
      { type: 'put', family: 'webhooks', key: 'w1', value: { id: 'w1' } },
    ]);
    expect(await store.getMany('events', ['e2', 'nope', 'e1'])).to.deep.equal([{ id: 'e2' }, undefined, { id: 'e1' }]);
    expect(await store.getMany('events', [])).to.deep.equal([]);
    expect(await store.getMany('webhooks', ['w1', 'w2'])).to.deep.equal([{ id: 'w1' }, undefined]);
    await store.commit([{ type: 'del', family: 'events', key: 'e1' }]);
    expect(await store.getMany('events', ['e1', 'e2'])).to.deep.equal([undefined, { id: 'e2' }]);
    await store.close();
  });

  it('refuses a second opener of the same directory with a clear error', async () => {
    const store = await Store.open(dir);
    try {
      await Store.open(dir).then(
        () => expect.fail('second open succeeded'),
        (err: unknown) => {
          expect(err).to.be.instanceOf(StoreLockedError);
          expect((err as Error).message).to.contain('in use by another process');
        },
      );
    } finally {
      await store.close();
    }
  });

  it('writes every commit with sync: true', async () => {
    // The committer hands encoded operations straight to classic-level's _batch.
    const { Level } = await import('level');
    const proto = Level.prototype as unknown as { _batch: (...a: unknown[]) => Promise<void> };
    const original = proto._batch;
    const seen: unknown[] = [];
    proto._batch = function (this: unknown, ...args: unknown[]) {
      seen.push(args[1]);
      return original.apply(this, args);
    };
    try {
      const store = await Store.open(dir);
      await store.commit([{ type: 'put', family: 'meta', key: 'a', value: 1 }]);
      expect(await store.get('meta', 'a')).to.equal(1);
      await store.close();
    } finally {
      proto._batch = original;
    }
    expect(seen).to.deep.equal([{ sync: true }]);
  });
});
