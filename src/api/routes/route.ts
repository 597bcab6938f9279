import type { Next } from 'koa';
import type { ApiContext } from '../context.ts';
import type { OperationId } from '../operations.ts';

export type Handler = (ctx: ApiContext, next: Next) => Promise<void>;

/** A route binds an operation of the table to its handler; middleware comes from the table. */
export interface Route {
  operationId: OperationId;
  handler: Handler;
}
