import type { Next } from 'koa';
import { AppError } from '../../util/errors.ts';
import { allowedMethods } from '../allowed-methods.ts';
import { InsufficientStorageError } from '../../store/storage-guard.ts';
import { SharedStoreError, StoreWriteError } from '../../store/store.ts';
import type { ApiContext } from '../context.ts';

/** How long a client is asked to wait while the cluster database cannot be reached (a restart or a failover takes seconds). */
const SHARED_STORE_RETRY_SECONDS = 10;

/** nginx's status for a client that went away before its request was read; never sent. */
export const CLIENT_CLOSED_REQUEST = 499;

/** The client closed the connection while its request was being read: its doing, not ours. */
export class ClientClosedRequest extends AppError {
  constructor() {
    super(CLIENT_CLOSED_REQUEST, 'client closed the connection before the request was read');
  }
}

/**
 * Whether a path is the legacy v1 API's, whose errors are `{status}` (the router ignores case);
 * `//v1/…` too: a client that doubles a slash still speaks v1 and reads v1's errors.
 */
export function isV1Path(path: string): boolean {
  return /^\/+v1(?:\/|$)/i.test(path);
}

/** The contract's error body for a request to `path`. */
export function errorBody(path: string, message: string): { status: string } | { message: string } {
  return isV1Path(path) ? { status: message } : { message };
}

/**
 * The one place where failures become responses: `{message}` for v2 (and `{status}` for v1).
 * Clients see the words of AppErrors and of exposed 4xx http-errors only; anything else is a
 * 500 "internal server error" whose details go to the log with the request id.
 */
export async function errorResponses(ctx: ApiContext, next: Next): Promise<void> {
  try {
    await next();
    if (ctx.status === 404 && ctx.body === undefined) throw new AppError(404, 'not found');
    // The router lists a path's methods in the order its handlers were registered; the listener,
    // answering methods Node's parser refuses, lists them from the route table: one order for both.
    const allow = ctx.response.get('Allow') ? allowedMethods(ctx.path).join(', ') || ctx.response.get('Allow') : '';
    if (allow) ctx.set('Allow', allow);
    // The router answers these itself (with an Allow header); give them the error body too.
    if (ctx.status === 405 && !ctx.body) throw new AppError(405, 'method not allowed', { Allow: allow });
    // The router says 501 for any method it has no route for at all (TRACE, PROPFIND, …): where
    // the path exists, the method is just not allowed there; where it does not, there is nothing
    // to apply any method to, so the answer is the same 404 a GET gets.
    if (ctx.status === 501 && !ctx.body) {
      if (allow) throw new AppError(405, 'method not allowed', { Allow: allow });
      ctx.remove('Allow');
      throw new AppError(404, 'not found');
    }
  } catch (err) {
    const { status, message, headers, unexpected } = describe(err);
    if (unexpected) ctx.state.log.error({ err }, 'request failed');
    else if (status === CLIENT_CLOSED_REQUEST) ctx.state.log.info('client closed the connection before its request was read');
    // Storage refusals: the storage guard says so once, not once per request.
    else if (status === 507) ctx.state.log.debug({ status }, 'request refused: insufficient storage');
    else if (status >= 500 && status !== 501) ctx.state.log.warn({ status, reason: message }, 'request refused');
    ctx.status = status;
    ctx.set(headers);
    ctx.body = errorBody(ctx.path, message);
  }
}

function describe(err: unknown): { status: number; message: string; headers: Record<string, string>; unexpected: boolean } {
  if (err instanceof AppError) return { status: err.status, message: err.message, headers: err.headers, unexpected: false };
  if (err instanceof InsufficientStorageError) return { status: 507, message: err.message, headers: { 'Retry-After': '60' }, unexpected: false };
  // The store reopening after a failed write (store/store.ts recover): a moment, not a fault.
  const level = (err as { code?: unknown })?.code;
  if (level === 'LEVEL_DATABASE_NOT_OPEN' || level === 'LEVEL_ITERATOR_NOT_OPEN')
    return { status: 503, message: 'the store is reopening; try again in a moment', headers: { 'Retry-After': '1' }, unexpected: false };
  // A file the request writes outside the store (a DKIM key in keys.dir) on a full or read-only filesystem.
  const code = (err as { code?: unknown })?.code;
  if (code === 'LEVEL_IO_ERROR')
    return {
      status: 507,
      message: 'insufficient storage: the server could not store this request; try again later',
      headers: { 'Retry-After': '60' },
      unexpected: false,
    };
  if (code === 'ENOSPC' || code === 'EROFS')
    return {
      status: 507,
      message: `insufficient storage: the server could not write a file (${code === 'ENOSPC' ? 'no space left' : 'read-only filesystem'}); try again later`,
      headers: { 'Retry-After': '60' },
      unexpected: false,
    };
  // Cluster mode: the shared database is down or unreachable (or failing over); this node is not at fault.
  if (err instanceof SharedStoreError)
    return {
      status: 503,
      message: 'service unavailable: the cluster database cannot be reached; try again later',
      headers: { 'Retry-After': String(SHARED_STORE_RETRY_SECONDS) },
      unexpected: false,
    };
  if (err instanceof StoreWriteError)
    return {
      status: 507,
      message: 'insufficient storage: the server could not store this request; try again later',
      headers: { 'Retry-After': '60' },
      unexpected: false,
    };
  // http-errors (ctx.throw, koa internals) mark the messages meant for clients with `expose`.
  const http = err as { status?: unknown; expose?: unknown; message?: unknown };
  if (http.expose === true && typeof http.status === 'number' && http.status >= 400 && http.status < 500 && typeof http.message === 'string') {
    return { status: http.status, message: http.message, headers: {}, unexpected: false };
  }
  return { status: 500, message: 'internal server error', headers: {}, unexpected: true };
}
