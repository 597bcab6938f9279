import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store, StoreWriteError } from '../../../src/store/store.ts';

/**
 * Store.recover after a failed write: LevelDB keeps a failed write as its state (a sticky
 * injected fault plays it), so the store is closed and opened again, and what was synced before
 * the failure reads back intact.
 */
describe('store recovery after a failed write', () => {
  let dir: string;
  let store: Store;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-recover-'));
    store = await Store.open(dir);
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('tells its watcher of a failed batch, keeps failing like LevelDB until reopened, and keeps what was acknowledged', async () => {
    const seen: unknown[] = [];
    store.watchWrites((err) => seen.push(err));
    const body = Buffer.from('x'.repeat(10_000));
    await store.commit([{ type: 'put', family: 'accounts', key: 'a1', value: { id: 'a1', name: 'kept' } }, { type: 'put', family: 'bodies', key: 'b1', value: body }]);
    let full = true;
    store.injectFault(() => (full ? new Error('IO error: 000009.log: No space left on device') : null), { sticky: true });
    const failed = await store.commit([{ type: 'put', family: 'accounts', key: 'a2', value: { id: 'a2' } }]).catch((err: unknown) => err);
    expect(failed).to.be.instanceOf(StoreWriteError);
    expect(seen).to.have.length(1);
    expect(store.writeFailed).to.equal(true);
    full = false;
    // Sticky: room is back, but the database keeps its error until it is reopened.
    expect(await store.commit([{ type: 'put', family: 'accounts', key: 'a3', value: { id: 'a3' } }]).catch((err: unknown) => err)).to.be.instanceOf(StoreWriteError);
    await store.recover();
    expect(store.writeFailed).to.equal(false);
    expect(store.isOpen).to.equal(true);
    expect(await store.get('accounts', 'a1')).to.deep.equal({ id: 'a1', name: 'kept' });
    expect(Buffer.compare((await store.families.bodies.get('b1')) as Buffer, body)).to.equal(0);
    expect(await store.get('accounts', 'a2')).to.equal(undefined);
    await store.commit([{ type: 'put', family: 'accounts', key: 'a4', value: { id: 'a4' } }]);
    expect(await store.get('accounts', 'a4')).to.deep.equal({ id: 'a4' });
  });

  it('rejects recover() while writes still fail, and stays readable', async () => {
    store.injectFault(() => new Error('IO error: LOCK: Read-only file system'));
    await store.commit([{ type: 'put', family: 'accounts', key: 'a1', value: { id: 'a1' } }]).catch(() => undefined);
    const err = await store.recover().catch((e: unknown) => e);
    expect((err as Error).message).to.match(/Read-only/);
    expect(await store.get('accounts', 'a1')).to.equal(undefined);
    store.injectFault(null);
    await store.recover();
    expect(store.writeFailed).to.equal(false);
  });
});
