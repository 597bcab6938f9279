import type { Context, Next } from 'koa';
import { requestedPolicy } from '../../domains/mta-sts-policy.ts';

/**
 * Serves `GET /.well-known/mta-sts.txt` for the policy hosts of mta_sts_policy (Host
 * `mta-sts.<domain>`): text/plain, no authentication (RFC 8461 §3.3). Anything else goes on to
 * the API as before.
 */
export function mtaStsPolicy(policies: () => Readonly<Record<string, string>>) {
  // Not async: every API request passes here, and only policy fetches stop.
  return (ctx: Context, next: Next): Promise<void> => {
    // The sends and other writes go on at once, without the host and target looked at.
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    const text = requestedPolicy(policies(), ctx.method, ctx.url, ctx.get('host') || undefined);
    if (text === null) return next();
    ctx.status = 200;
    ctx.type = 'text/plain';
    ctx.set('Cache-Control', 'max-age=300');
    ctx.body = text;
    return Promise.resolve();
  };
}
