import type { Next } from 'koa';
import { AppError } from '../../util/errors.ts';
import type { ApiContext } from '../context.ts';

/**
 * Reads the raw request bytes (bounded) before anything decodes them: idempotency hashes the
 * exact bytes, and handlers parse JSON from them with validation.
 */
export function rawBody(limitBytes: () => number) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    if (ctx.method === 'GET' || ctx.method === 'HEAD' || ctx.method === 'DELETE' || ctx.method === 'OPTIONS') {
      await next();
      return;
    }
    const limit = limitBytes();
    const declared = Number(ctx.get('content-length') || 0);
    if (declared > limit) throw new AppError(413, `request body is larger than ${limit} bytes`);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of ctx.req) {
      size += (chunk as Buffer).length;
      if (size > limit) throw new AppError(413, `request body is larger than ${limit} bytes`);
      chunks.push(chunk as Buffer);
    }
    ctx.state.rawBody = Buffer.concat(chunks);
    await next();
  };
}
