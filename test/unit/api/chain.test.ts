import { expect } from 'chai';
import { chainOf, type Layer } from '../../../src/api/chain.ts';
import type { ApiContext } from '../../../src/api/context.ts';

const ctx = {} as ApiContext;

describe('chainOf', () => {
  it('runs the layers in order, each around the rest, then the next given to the chain', async () => {
    const seen: string[] = [];
    const layer =
      (name: string): Layer =>
      async (_ctx, next) => {
        seen.push(`${name} in`);
        await next();
        seen.push(`${name} out`);
      };
    await chainOf([layer('a'), layer('b')])(ctx, async () => {
      seen.push('after');
    });
    expect(seen).to.deep.equal(['a in', 'b in', 'after', 'b out', 'a out']);
  });

  it('turns a layer that throws at once into a rejection that outer layers can catch', async () => {
    const caught: unknown[] = [];
    const outer: Layer = (_ctx, next) => next().catch((err: unknown) => caught.push(err));
    const thrower: Layer = () => {
      throw new Error('refused');
    };
    const chain = chainOf([outer, thrower]);
    await chain(ctx, async () => {});
    expect(caught.map((e) => (e as Error).message)).to.deep.equal(['refused']);
    const alone = chainOf([thrower])(ctx, async () => {});
    expect(alone).to.be.instanceOf(Promise);
    await alone.then(
      () => expect.fail('resolved'),
      (err: Error) => expect(err.message).to.equal('refused'),
    );
  });

  it('rejects a second call of next by the same layer', async () => {
    const twice: Layer = async (_ctx, next) => {
      await next();
      await next();
    };
    await chainOf([twice])(ctx, async () => {}).then(
      () => expect.fail('resolved'),
      (err: Error) => expect(err.message).to.equal('next() called multiple times'),
    );
  });

  it('resolves when the last layer does not call next, and never calls the next given to the chain', async () => {
    let called = false;
    await chainOf([async () => {}])(ctx, async () => {
      called = true;
    });
    expect(called).to.equal(false);
  });
});
