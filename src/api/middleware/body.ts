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
    const read = new BodyRead(ctx.req, declared, limit, budget);
    try {
      // A declared length is held whole at once, so a request is refused before it sends a byte
      // more than it can be given; a chunked one is held as it grows.
      if (declared !== null) read.hold(declared);
      // The listener leaves 100-continue to us: only a request that got this far sends its body.
      if (ctx.req.httpVersion === '1.1' && /(?:^|\W)100-continue(?:$|\W)/i.test(ctx.get('expect')) && !ctx.res.headersSent) ctx.res.writeContinue();
      ctx.state.rawBody = await read.body();
      await next();
    } finally {
      budget.release(read.held);
    }
  };
}

/**
 * One request body being read: the body bytes, or a ClientClosedRequest when the client goes
 * away first. On any refusal the rest of the body is read and dropped, so that the response
 * still reaches the client and the connection stays usable.
 */
class BodyRead {
  /** Bytes reserved in the budget for this request. */
  held = 0;
  private size = 0;
  private whole: Buffer | null = null;
  private readonly chunks: Buffer[] = [];
  private resolve: (body: Buffer) => void = ignore;
  private reject: (err: Error) => void = ignore;
  private readonly onData = this.data.bind(this);
  private readonly onEnd = this.finish.bind(this, null);
  // 'error' (ECONNRESET "aborted") or 'close' before 'end': the client went away mid-body.
  private readonly onClose = this.closed.bind(this);

  constructor(
    private readonly req: IncomingMessage,
    private readonly declared: number | null,
    private readonly limitBytes: number,
    private readonly budget: BodyBudget,
  ) {}

  hold(bytes: number): void {
    if (!this.budget.reserve(bytes)) throw busy();
    this.held += bytes;
  }

  body(): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      // Gone while it waited for authentication: whatever it sent is no longer readable.
      if (this.req.destroyed) return reject(new ClientClosedRequest());
      if (this.declared !== null) this.whole = Buffer.allocUnsafe(this.declared);
      this.resolve = resolve;
      this.reject = reject;
      this.req.on('data', this.onData);
      this.req.on('end', this.onEnd);
      this.req.on('error', this.onClose);
      this.req.on('close', this.onClose);
    });
  }

  private data(chunk: Buffer): void {
    try {
      if (this.size + chunk.length > this.limitBytes) throw tooLarge(this.limitBytes);
      if (this.whole) {
        chunk.copy(this.whole, this.size);
      } else {
        this.hold(chunk.length);
        this.chunks.push(chunk);
      }
      this.size += chunk.length;
    } catch (err) {
      this.finish(err as Error);
    }
  }

  private closed(): void {
    this.finish(new ClientClosedRequest());
  }

  private finish(err: Error | null): void {
    const req = this.req;
    req.off('data', this.onData);
    req.off('end', this.onEnd);
    req.off('error', this.onClose);
    req.off('close', this.onClose);
    if (!err) return this.resolve(this.whole ? this.whole.subarray(0, this.size) : Buffer.concat(this.chunks, this.size));
    // Drop what is left of the body (nothing is kept), and keep an error listener: a client
    // that goes away now must not become an unhandled 'error' event.
    req.on('error', ignore);
    if (!req.destroyed) req.resume();
    this.reject(err);
  }
}

function ignore(): void {}
