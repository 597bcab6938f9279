import type { Route } from '../route.ts';

export const pingRoutes: Route[] = [
  {
    operationId: 'ping',
    handler: async (ctx) => {
      ctx.body = { message: 'pong' };
    },
  },
];
