import { expect } from 'chai';
import { KeyedMutex } from '../../../src/util/keyed-mutex.ts';

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('KeyedMutex', () => {
  it('runs sections of the same key one after the other, in call order', async () => {
    const mutex = new KeyedMutex();
    const events: string[] = [];
    const gate = deferred();

    const first = mutex.run('k', async () => {
      events.push('first start');
      await gate.promise;
      events.push('first end');
      return 1;
    });
    const second = mutex.run('k', async () => {
      events.push('second start');
      return 2;
    });
    const third = mutex.run('k', async () => {
      events.push('third start');
      return 3;
    });

    for (let i = 0; i < 5; i++) await tick();
    expect(events).to.deep.equal(['first start']);

    gate.resolve();
    expect(await Promise.all([first, second, third])).to.deep.equal([1, 2, 3]);
    expect(events).to.deep.equal(['first start', 'first end', 'second start', 'third start']);
  });

  it('runs sections of different keys concurrently', async () => {
    const mutex = new KeyedMutex();
    const gateA = deferred();
    const events: string[] = [];

    const a = mutex.run('a', async () => {
      events.push('a start');
      await gateA.promise;
      events.push('a end');
    });
    const b = mutex.run('b', async () => {
      events.push('b start');
      events.push('b end');
    });

    await b;
    expect(events).to.deep.equal(['a start', 'b start', 'b end']);
    gateA.resolve();
    await a;
    expect(events.at(-1)).to.equal('a end');
  });

  it('releases the key when a section throws, and passes the error to its caller', async () => {
    const mutex = new KeyedMutex();
    const failure = new Error('section failed');

    const failing = mutex.run('k', async () => {
      await tick();
      throw failure;
    });
    const next = mutex.run('k', async () => 'ran');

    let caught: unknown;
    try {
      await failing;
    } catch (err) {
      caught = err;
    }
    expect(caught).to.equal(failure);
    expect(await next).to.equal('ran');
    expect(await mutex.run('k', async () => 'still usable')).to.equal('still usable');
  });

  it('does not let a later section start while an earlier throwing one is still running', async () => {
    const mutex = new KeyedMutex();
    const gate = deferred();
    let secondStarted = false;

    const failing = mutex.run('k', async () => {
      await gate.promise;
      throw new Error('late failure');
    });
    const second = mutex.run('k', async () => {
      secondStarted = true;
    });

    for (let i = 0; i < 5; i++) await tick();
    expect(secondStarted).to.equal(false);
    gate.resolve();
    await failing.catch(() => undefined);
    await second;
    expect(secondStarted).to.equal(true);
  });
});
