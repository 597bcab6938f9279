import Router from '@koa/router';
import { OPERATIONS } from './operations.ts';

/** The legacy v1 send, the one route outside the v2 operations table. */
export const V1_SEND = { method: 'POST', path: '/v1/email/send' } as const;

/**
 * Every route of the API, matched as the app's router matches (same router, same options), for
 * what answers before the app does: Node refuses a method it does not know (`FOO`, `get`) in
 * its parser, and the listener still owes such a request the router's 405 and `Allow`.
 */
const layers = (() => {
  const router = new Router();
  const noop = async () => {};
  for (const op of Object.values(OPERATIONS)) router.register(`/v2${op.path}`, [op.method], noop);
  router.register(V1_SEND.path, [V1_SEND.method], noop);
  return router.stack;
})();

/** The methods routed at `path` in the router's order (GET brings HEAD); empty when none is. */
export function allowedMethods(path: string): string[] {
  const methods = new Set<string>();
  for (const layer of layers) {
    if (layer.match(path)) for (const method of layer.methods) methods.add(method);
  }
  return [...methods];
}
