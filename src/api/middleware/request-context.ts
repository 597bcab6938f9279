import type { Next } from 'koa';
import type { Logger } from 'pino';
import { cidrContains, isLoopback, parseClientIp, type Cidr } from '../../util/cidr.ts';
import { forbidden } from '../../util/errors.ts';
import { newId } from '../../util/ids.ts';
import type { ApiContext } from '../context.ts';

export interface TransportPolicy {
  /** Peers whose X-Forwarded-For / X-Forwarded-Proto are believed. */
  trustedProxies: Cidr[];
}

/**
 * Request id, per-request logger and one access-log line (the logger gains account_id once the
 * caller is authenticated). Outermost middleware.
 */
export function requestContext(log: Logger) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    const started = process.hrtime.bigint();
    ctx.state.requestId = newId();
    ctx.state.log = log.child({ request_id: ctx.state.requestId });
    ctx.set('x-request-id', ctx.state.requestId);
    try {
      await next();
    } finally {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      ctx.state.log.info(
        {
          method: ctx.method,
          path: ctx.path,
          status: ctx.status,
          ms: Math.round(ms * 10) / 10,
        },
        'request',
      );
    }
  };
}

/**
 * Works out the client address and refuses plain HTTP from anywhere but loopback, or a trusted
 * proxy that says the client spoke HTTPS.
 */
export function transport(policy: () => TransportPolicy) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    const peer = parseClientIp(ctx.req.socket.remoteAddress ?? '');
    if (!peer) throw forbidden('client address unknown');
    const { trustedProxies } = policy();
    const trusted = (ip: NonNullable<typeof peer>) => trustedProxies.some((cidr) => cidrContains(cidr, ip));
    let client = peer;
    let secure = (ctx.req.socket as { encrypted?: boolean }).encrypted === true;
    if (trusted(peer)) {
      // Walk X-Forwarded-For from the right, past our own proxies, to the first outside hop.
      const hops = (ctx.get('x-forwarded-for') || '').split(',').map((s) => s.trim()).filter(Boolean);
      for (let i = hops.length - 1; i >= 0; i--) {
        const hop = parseClientIp(hops[i]!);
        if (!hop) break;
        client = hop;
        if (!trusted(hop)) break;
      }
      const proto = ctx.get('x-forwarded-proto').split(',')[0]?.trim().toLowerCase();
      if (!secure) secure = proto ? proto === 'https' : isLoopback(client);
    } else if (!secure) {
      secure = isLoopback(peer);
    }
    if (!secure) throw forbidden('HTTPS is required');
    ctx.state.clientIp = client;
    await next();
  };
}
