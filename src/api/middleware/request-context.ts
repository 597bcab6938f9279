import type { Socket } from 'node:net';
import type ipaddr from 'ipaddr.js';
import type { Next } from 'koa';
import type { Logger } from 'pino';
import { cidrContains, isLoopback, parseClientIp, type Cidr } from '../../util/cidr.ts';
import { forwardedClient } from '../../util/forwarded.ts';
import { badRequest, forbidden } from '../../util/errors.ts';
import { newId } from '../../util/ids.ts';
import type { ApiContext } from '../context.ts';

export interface TransportPolicy {
  /** Peers whose X-Forwarded-For / X-Forwarded-Proto are believed. */
  trustedProxies: Cidr[];
}

/** The body of bodiless requests: empty, so it is shared. */
const NO_BODY = Buffer.alloc(0);

/**
 * Request id, per-request logger and one access-log line (authentication adds account_id to the
 * logger's bindings). Outermost middleware.
 */
export function requestContext(log: Logger) {
  // While the level is silent, requests share one child that logs nothing: a child of its own
  // would serialise (and redact) its bindings for lines never written.
  let quiet: Logger | null = null;
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    const started = process.hrtime.bigint();
    ctx.state.requestId = newId();
    ctx.state.rawBody = NO_BODY;
    ctx.state.log = log.isLevelEnabled('fatal') ? log.child({ request_id: ctx.state.requestId }) : (quiet ??= log.child({}, { level: 'silent' }));
    ctx.set('x-request-id', ctx.state.requestId);
    try {
      await next();
    } finally {
      // Below the level, the line would be built only to be dropped.
      if (ctx.state.log.isLevelEnabled('info')) logRequest(ctx, started);
    }
  };
}

function logRequest(ctx: ApiContext, started: bigint): void {
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

/**
 * Works out the client address and refuses plain HTTP from anywhere but loopback, or a trusted
 * proxy that says the client spoke HTTPS.
 */
export function transport(policy: () => TransportPolicy) {
  // Not async: the chain (koa-compose) turns a throw into a rejection, and next's promise is passed on.
  return (ctx: ApiContext, next: Next): Promise<void> => {
    const peer = peerOf(ctx.req.socket);
    if (!peer) throw forbidden('client address unknown');
    const { trustedProxies } = policy();
    let client = peer;
    let secure = (ctx.req.socket as { encrypted?: boolean }).encrypted === true;
    let https = secure;
    if (trustedProxies.some((cidr) => cidrContains(cidr, peer))) {
      const found = forwardedClient(peer, ctx.get('x-forwarded-for'), trustedProxies);
      if (typeof found === 'string') throw badRequest(`X-Forwarded-For holds an unreadable address: "${found}"`);
      client = found;
      // The right-most value is the one our proxy set; values to its left came from the client.
      const proto = ctx.get('x-forwarded-proto').split(',').at(-1)?.trim().toLowerCase();
      if (!secure) {
        https = proto === 'https';
        secure = proto ? https : isLoopback(client);
      }
    } else if (!secure) {
      secure = isLoopback(peer);
    }
    if (!secure) throw forbidden('HTTPS is required');
    ctx.state.clientIp = client;
    ctx.state.https = https;
    return next();
  };
}

/** The parsed peer address of each connection: the requests of a kept-alive connection share it. */
const peers = new WeakMap<Socket, ipaddr.IPv4 | ipaddr.IPv6>();

function peerOf(socket: Socket): ipaddr.IPv4 | ipaddr.IPv6 | null {
  let peer = peers.get(socket);
  if (peer === undefined) {
    const parsed = parseClientIp(socket.remoteAddress ?? '');
    if (!parsed) return null;
    peer = parsed;
    peers.set(socket, peer);
  }
  return peer;
}
