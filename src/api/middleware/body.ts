import type { IncomingMessage } from 'node:http';
import type { Next } from 'koa';
import { AppError } from '../../util/errors.ts';
import type { ApiContext } from '../context.ts';
import { ClientClosedRequest } from './errors.ts';

/**
 * The request-body bytes the process holds at once, over all requests. A body is held from the
 * moment it is admitted until its request has been handled; a request that would push the sum
 * over the cap is refused with 503 instead of being buffered.
 */
export class BodyBudget {
  private used = 0;

  constructor(private readonly capBytes: () => number) {}

  /** Holds `bytes` more if the cap allows it. */
  reserve(bytes: number): boolean {
    if (this.used + bytes > this.capBytes()) return false;
    this.used += bytes;
    return true;
  }

  release(bytes: number): void {
    this.used -= bytes;
  }
}

const busy = () => new AppError(503, 'the server is receiving too many request bodies at once, retry later', { 'Retry-After': '1' });
const tooLarge = (limit: number) => new AppError(413, `request body is larger than ${limit} bytes`);

/**
 * Reads the raw request bytes (bounded per request and in total) before anything decodes them:
 * idempotency hashes the exact bytes, and handlers parse JSON from them with validation.
 */
export function rawBody(limitBytes: () => number, budget: BodyBudget) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    if (ctx.method === 'GET' || ctx.method === 'HEAD' || ctx.method === 'DELETE' || ctx.method === 'OPTIONS') {
      await next();
      return;
    }
    const limit = limitBytes();
    // Node has checked that Content-Length is a single run of digits when present.
    const header = ctx.get('content-length');
    const declared = header ? Number(header) : null;
    if (declared !== null && declared > limit) throw tooLarge(limit);
    let held = 0;
    const hold = (bytes: number) => {
      if (!budget.reserve(bytes)) throw busy();
      held += bytes;
    };
    try {
      // A declared length is held whole at once, so a request is refused before it sends a byte
      // more than it can be given; a chunked one is held as it grows.
      if (declared !== null) hold(declared);
      // The listener leaves 100-continue to us: only a request that got this far sends its body.
      if (ctx.req.httpVersion === '1.1' && /(?:^|\W)100-continue(?:$|\W)/i.test(ctx.get('expect')) && !ctx.res.headersSent) ctx.res.writeContinue();
      ctx.state.rawBody = await readBody(ctx.req, declared, limit, declared === null ? hold : () => {});
      await next();
    } finally {
      budget.release(held);
    }
  };
}

/**
 * The body bytes, or a ClientClosedRequest when the client goes away first. On any refusal the
 * rest of the body is read and dropped, so that the response still reaches the client and the
 * connection stays usable.
 */
function readBody(req: IncomingMessage, declared: number | null, limitBytes: number, grow: (bytes: number) => void): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    // Gone while it waited for authentication: whatever it sent is no longer readable.
    if (req.destroyed) return reject(new ClientClosedRequest());
    const whole = declared !== null ? Buffer.allocUnsafe(declared) : null;
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (err: Error | null) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onClose);
      req.off('close', onClose);
      if (!err) return resolve(whole ? whole.subarray(0, size) : Buffer.concat(chunks, size));
      // Drop what is left of the body (nothing is kept), and keep an error listener: a client
      // that goes away now must not become an unhandled 'error' event.
      req.on('error', () => {});
      if (!req.destroyed) req.resume();
      reject(err);
    };
    const onData = (chunk: Buffer) => {
      try {
        if (size + chunk.length > limitBytes) throw tooLarge(limitBytes);
        if (whole) {
          chunk.copy(whole, size);
        } else {
          grow(chunk.length);
          chunks.push(chunk);
        }
        size += chunk.length;
      } catch (err) {
        finish(err as Error);
      }
    };
    const onEnd = () => finish(null);
    // 'error' (ECONNRESET "aborted") or 'close' before 'end': the client went away mid-body.
    const onClose = () => finish(new ClientClosedRequest());
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onClose);
    req.on('close', onClose);
  });
}
