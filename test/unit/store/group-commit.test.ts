import { expect } from 'chai';
import { GroupCommitter, type WriteOp } from '../../../src/store/group-commit.ts';

interface Call {
  ops: WriteOp[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** A writeBatch whose every call waits until the test settles it. */
function fakeWriter() {
  const calls: Call[] = [];
  const writeBatch = (ops: WriteOp[]) =>
    new Promise<void>((resolve, reject) => {
      calls.push({ ops, resolve, reject });
    });
  /** Waits until the i-th call (0-based) has been made. */
  const call = async (i: number): Promise<Call> => {
    for (let spins = 0; spins < 1000 && calls.length <= i; spins++) await tick();
    const found = calls[i];
    if (!found) throw new Error(`writeBatch call #${i} was never made (got ${calls.length})`);
    return found;
  };
  return { calls, writeBatch, call };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

const put = (key: string): WriteOp => ({ type: 'put', family: 'accounts', key, value: { key } });

/** Tracks whether a promise has settled and how. */
function observe(promise: Promise<void>) {
  const state: { settled: 'pending' | 'resolved' | 'rejected'; error?: unknown } = { settled: 'pending' };
  promise.then(
    () => (state.settled = 'resolved'),
    (err: unknown) => {
      state.settled = 'rejected';
      state.error = err;
    },
  );
  return state;
}

describe('GroupCommitter', () => {
  it('merges submissions made while a batch is in flight into one following batch', async () => {
    const writer = fakeWriter();
    const committer = new GroupCommitter(writer.writeBatch);

    const first = committer.submit([put('a')]);
    const firstCall = await writer.call(0);
    expect(firstCall.ops.map((op) => op.key)).to.deep.equal(['a']);

    const second = committer.submit([put('b1'), put('b2')]);
    const third = committer.submit([{ type: 'del', family: 'users', key: 'c' }]);
    await tick();
    expect(writer.calls).to.have.length(1);

    firstCall.resolve();
    const secondCall = await writer.call(1);
    expect(secondCall.ops.map((op) => op.key)).to.deep.equal(['b1', 'b2', 'c']);
    secondCall.resolve();

    await Promise.all([first, second, third]);
    expect(writer.calls).to.have.length(2);
    expect(committer.stats).to.deep.equal({ batches: 2, writes: 3 });
  });

  it('does not resolve a caller before the write of its batch has resolved', async () => {
    const writer = fakeWriter();
    const committer = new GroupCommitter(writer.writeBatch);

    const first = observe(committer.submit([put('a')]));
    const firstCall = await writer.call(0);
    const second = observe(committer.submit([put('b')]));
    for (let i = 0; i < 5; i++) await tick();
    expect(first.settled).to.equal('pending');

    firstCall.resolve();
    const secondCall = await writer.call(1);
    expect(first.settled).to.equal('resolved');
    for (let i = 0; i < 5; i++) await tick();
    expect(second.settled).to.equal('pending');

    secondCall.resolve();
    await committer.drain();
    expect(second.settled).to.equal('resolved');
  });

  it('resolves an empty submission at once without writing', async () => {
    const writer = fakeWriter();
    const committer = new GroupCommitter(writer.writeBatch);
    await committer.submit([]);
    expect(writer.calls).to.have.length(0);
    expect(committer.stats).to.deep.equal({ batches: 0, writes: 0 });
  });

  it('rejects a lone caller whose batch fails, with the write error', async () => {
    const writer = fakeWriter();
    const committer = new GroupCommitter(writer.writeBatch);
    const failure = new Error('disk full');

    const lone = observe(committer.submit([put('a')]));
    (await writer.call(0)).reject(failure);
    await committer.drain();

    expect(lone).to.deep.equal({ settled: 'rejected', error: failure });
    expect(writer.calls).to.have.length(1);
    expect(committer.stats.batches).to.equal(0);
  });

  it('retries each caller of a failed merged batch alone, so only the caller with bad ops is rejected', async () => {
    const writer = fakeWriter();
    const committer = new GroupCommitter(writer.writeBatch);

    const first = observe(committer.submit([put('a')]));
    const firstCall = await writer.call(0);
    const good = observe(committer.submit([put('good')]));
    const bad = observe(committer.submit([put('bad')]));
    firstCall.resolve();

    const merged = await writer.call(1);
    expect(merged.ops.map((op) => op.key)).to.deep.equal(['good', 'bad']);
    merged.reject(new Error('merged batch refused'));

    const retryGood = await writer.call(2);
    expect(retryGood.ops.map((op) => op.key)).to.deep.equal(['good']);
    retryGood.resolve();

    const retryBad = await writer.call(3);
    expect(retryBad.ops.map((op) => op.key)).to.deep.equal(['bad']);
    const ownError = new Error('bad op');
    retryBad.reject(ownError);

    await committer.drain();
    expect(first.settled).to.equal('resolved');
    expect(good.settled).to.equal('resolved');
    expect(bad).to.deep.equal({ settled: 'rejected', error: ownError });
    expect(committer.stats).to.deep.equal({ batches: 2, writes: 2 });
  });

  it('keeps accepting work after a failed batch', async () => {
    const writer = fakeWriter();
    const committer = new GroupCommitter(writer.writeBatch);
    const failed = observe(committer.submit([put('a')]));
    (await writer.call(0)).reject(new Error('boom'));
    await committer.drain();
    expect(failed.settled).to.equal('rejected');

    const later = committer.submit([put('b')]);
    (await writer.call(1)).resolve();
    await later;
    expect(committer.stats.batches).to.equal(1);
  });

  it('drain waits until every submission, including ones queued behind the running batch, is written', async () => {
    const writer = fakeWriter();
    const committer = new GroupCommitter(writer.writeBatch);

    const first = observe(committer.submit([put('a')]));
    const firstCall = await writer.call(0);
    const second = observe(committer.submit([put('b')]));

    const drained = observe(committer.drain());
    firstCall.resolve();
    const secondCall = await writer.call(1);
    for (let i = 0; i < 5; i++) await tick();
    expect(drained.settled).to.equal('pending');

    secondCall.resolve();
    await committer.drain();
    await tick();
    expect(drained.settled).to.equal('resolved');
    expect(first.settled).to.equal('resolved');
    expect(second.settled).to.equal('resolved');
  });
});
