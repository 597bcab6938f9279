import type { Next } from 'koa';
import { AppError } from '../../util/errors.ts';
import type { ApiContext } from '../context.ts';

/**
 * The one place where failures become responses: `{message}` for v2 (and `{status}` for v1),
 * 500 only for what is truly unexpected, which is logged with the request id.
 */
export async function errorResponses(ctx: ApiContext, next: Next): Promise<void> {
  try {
    await next();
    if (ctx.status === 404 && ctx.body === undefined) throw new AppError(404, 'not found');
    // The router answers these itself (with an Allow header); give them the error body too.
    if (ctx.status === 405 && !ctx.body) throw new AppError(405, 'method not allowed', { Allow: ctx.response.get('Allow') });
    if (ctx.status === 501 && !ctx.body) throw new AppError(501, 'unsupported HTTP method');
  } catch (err) {
    const { status, message, headers } = describe(err);
    if (status >= 500) ctx.state.log.error({ err }, 'request failed');
    ctx.status = status;
    ctx.set(headers);
    ctx.body = ctx.path.startsWith('/v1/') ? { status: message } : { message };
  }
}

function describe(err: unknown): { status: number; message: string; headers: Record<string, string> } {
  if (err instanceof AppError) return { status: err.status, message: err.message, headers: err.headers };
  const http = err as { status?: unknown; expose?: unknown; message?: unknown };
  if (typeof http.status === 'number' && http.status >= 400 && http.status < 500 && typeof http.message === 'string') {
    return { status: http.status, message: http.message, headers: {} };
  }
  return { status: 500, message: 'internal server error', headers: {} };
}
