import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CountersRepo } from '../../../src/store/counters-repo.ts';
import { Signals } from '../../../src/util/signals.ts';
import { Store, StoreWriteError, type StoreSignals } from '../../../src/store/store.ts';

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
    await store.close();
    const signals = new Signals<StoreSignals>();
    signals.on('store.write-failed', (err) => seen.push(err));
    store = await Store.open(dir, { signals });
    const body = Buffer.from('x'.repeat(10_000));
    await store.commit([
      { type: 'put', family: 'accounts', key: 'a1', value: { id: 'a1', name: 'kept' } },
      { type: 'put', family: 'bodies', key: 'b1', value: body },
    ]);
    let full = true;
    store.injectFault(() => (full ? new Error('IO error: 000009.log: No space left on device') : null), { sticky: true });
    const failed = await store.commit([{ type: 'put', family: 'accounts', key: 'a2', value: { id: 'a2' } }]).catch((err: unknown) => err);
    expect(failed).to.be.instanceOf(StoreWriteError);
    expect(seen).to.have.length(1);
    expect(store.writeFailed).to.equal(true);
    full = false;
    // Sticky: room is back, but the database keeps its error until it is reopened.
    expect(await store.commit([{ type: 'put', family: 'accounts', key: 'a3', value: { id: 'a3' } }]).catch((err: unknown) => err)).to.be.instanceOf(
      StoreWriteError,
    );
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

/** The fold timer's interval here (1 s in the daemon): three turns of it in well under a second. */
const FOLD_MS = 200;

describe('the counters fold while writes fail', () => {
  let dir: string;
  let store: Store;
  let counters: CountersRepo;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-recover-fold-'));
    counters = new CountersRepo(null, FOLD_MS);
    store = await Store.open(dir, { journal: counters });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fails its batch, warns once rather than every second, and folds every add once the store recovers', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      await store.commit([{ type: 'add', family: 'counters', key: 'acct:1', value: { d: 1 } }]);
      await store.commit([{ type: 'add', family: 'counters', key: 'acct:1', value: { d: 2 } }]);
      // The fold's batch (the counter rows) fails; the batches that log adds do not.
      store.injectFault((ops) => (ops.some((op) => op.family === 'counters' && op.type === 'put') ? new Error('IO error: No space left on device') : null));
      expect(await counters.fold().catch((err: unknown) => err)).to.be.instanceOf(Error);
      await store.commit([{ type: 'add', family: 'counters', key: 'acct:1', value: { d: 4 } }]).catch(() => undefined);
      // Three turns of the fold timer: no fold is tried while the store has a failed write.
      await new Promise((r) => setTimeout(r, 3 * FOLD_MS + 200));
      expect(warnings.filter((w) => w.includes('folding'))).to.have.length.at.most(1);
      store.injectFault(null);
      await store.recover();
      await counters.fold();
      expect(await store.get('counters', 'acct:1')).to.deep.equal({ d: 7 });
    } finally {
      process.off('warning', onWarning);
    }
  });
});
