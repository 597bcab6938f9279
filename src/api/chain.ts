import type { Next } from 'koa';
import type { ApiContext } from './context.ts';

export type Layer = (ctx: ApiContext, next: Next) => unknown;

/**
 * One route's layers as a single middleware, composed once when the app is built. The router
 * composes the layers of the matched route again on every request (flattening the list anew);
 * handed one function, it has one to compose. Same contract as koa-compose: each layer's throw
 * becomes a rejection, and a layer calling next() twice gets a rejection.
 */
export function chainOf(layers: readonly Layer[]): (ctx: ApiContext, next: Next) => Promise<unknown> {
  return (ctx: ApiContext, next: Next): Promise<unknown> => dispatch(layers, ctx, next, { index: -1 }, 0);
}

/** Runs layer `i` of a request's pass through the chain; `pass.index` is the last layer started. */
function dispatch(layers: readonly Layer[], ctx: ApiContext, next: Next, pass: { index: number }, i: number): Promise<unknown> {
  if (i <= pass.index) return Promise.reject(new Error('next() called multiple times'));
  pass.index = i;
  const layer = i === layers.length ? next : layers[i];
  if (!layer) return Promise.resolve();
  try {
    return Promise.resolve(layer(ctx, () => dispatch(layers, ctx, next, pass, i + 1)));
  } catch (err) {
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- whatever a layer threw goes on as it is, as koa-compose passes it
    return Promise.reject(err);
  }
}
