import type { Next } from 'koa';
import type { Metrics } from '../../metrics/metrics.ts';
import type { ApiContext } from '../context.ts';

/**
 * Counts every answered request by operation and status and times it. Outermost, so the status
 * is the one the client got (errors included) and the time covers the whole app.
 */
export function requestMetrics(metrics: Metrics) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      // The router names the matched route after its operationId; anything else is one label, so
      // a scan of random paths cannot make new series.
      const operation = (ctx as { _matchedRouteName?: string })._matchedRouteName ?? 'unmatched';
      metrics.apiRequests.inc({ operation, status: String(ctx.status) });
      metrics.apiDuration.observe({ operation }, Number(process.hrtime.bigint() - started) / 1e9);
    }
  };
}
