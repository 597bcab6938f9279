import type { Counts } from '../../../store/group-commit.ts';
import { bucketCount, type Bucket, type Statistics, type StatsQuery } from '../../../stats/statistics.ts';
import { badRequest, forbidden } from '../../../util/errors.ts';
import { authOf, type ApiContext } from '../../context.ts';
import { parseQuery } from '../../validate.ts';
import type { Route } from '../route.ts';
import { statisticsQuery } from './schema.ts';

const DAY_MS = 86_400_000;
/** The window when from_time is not given: the 30 days before to_time. */
const DEFAULT_WINDOW_MS = 30 * DAY_MS;
/** Buckets one answer holds at most (a year of hours is 8,784). */
export const MAX_BUCKETS = 10_000;
const FAMILY = 'statistics-transactional:read';

/** The three statistics operations (reference-api §11), answered from the counters. */
export function statisticsRoutes(statistics: Statistics, now: () => number): Route[] {
  const buckets = async (ctx: ApiContext, series: StatsQuery['series'] = 'counts'): Promise<Bucket[]> => statistics.buckets(queryOf(ctx, now(), series));
  return [
    {
      operationId: 'getDeliverabilityStatistics',
      handler: async (ctx) => {
        ctx.body = { object: 'list', data: (await buckets(ctx)).map(deliverability) };
      },
    },
    {
      operationId: 'getBounceStatistics',
      handler: async (ctx) => {
        ctx.body = { object: 'list', data: (await buckets(ctx)).map(bounce) };
      },
    },
    {
      operationId: 'getDeliveryTimeStatistics',
      handler: async (ctx) => {
        const all = await buckets(ctx, 'times');
        const domains = recipientDomainsOf(all);
        ctx.body = { object: 'list', data: all.map((b) => deliveryTime(b, domains)) };
      },
    },
  ];
}

/**
 * The question a request asks. A domain-scoped key must hold the scope for every sender_domain
 * it names (403), and without sender_domain it sees only its own domains.
 */
function queryOf(ctx: ApiContext, now: number, series: StatsQuery['series']): StatsQuery {
  const q = parseQuery(ctx, statisticsQuery);
  const toText = q.to_time ?? q.to_date;
  const fromText = q.from_time ?? q.from_date;
  const toMs = toText !== undefined ? Date.parse(toText) : now;
  const fromMs = fromText !== undefined ? Date.parse(fromText) : toMs - DEFAULT_WINDOW_MS;
  if (fromMs >= toMs) throw badRequest('from_time must be before to_time');
  const count = bucketCount(fromMs, toMs, q.group_by);
  if (count > MAX_BUCKETS) throw badRequest(`the window holds ${count} ${q.group_by} buckets; at most ${MAX_BUCKETS}: narrow it or group by a longer period`);
  const auth = authOf(ctx);
  let senders = q.sender_domain && q.sender_domain.length > 0 ? q.sender_domain : null;
  if (!auth.grants.holdsAll(FAMILY)) {
    const allowed = auth.grants.domainsFor(FAMILY);
    const denied = senders?.find((d) => !allowed.includes(d));
    if (denied !== undefined) throw forbidden(`this API key may not read the statistics of ${denied}`);
    senders ??= allowed;
  }
  return {
    accountId: auth.account.id,
    series,
    fromMs,
    toMs,
    group: q.group_by,
    senderDomains: senders,
    recipientDomains: q.recipient_domains && q.recipient_domains.length > 0 ? q.recipient_domains : null,
    tags: q.tags && q.tags.length > 0 ? q.tags : null,
  };
}

function deliverability(b: Bucket) {
  return {
    ...times(b),
    reception_count: n(b.counts.r),
    delivered_count: n(b.counts.d),
    deferred_count: n(b.counts.df),
    bounced_count: n(b.counts.b),
    failed_count: n(b.counts.f),
    suppressed_count: n(b.counts.s),
    opened_count: n(b.counts.o),
    clicked_count: n(b.counts.c),
  };
}

function bounce(b: Bucket) {
  const classes = (b.counts.bc ?? {}) as Counts;
  return {
    ...times(b),
    bounces: Object.keys(classes)
      .sort()
      .map((classification) => ({ classification, count: n(classes[classification]) })),
  };
}

/** Every recipient domain of the buckets' delivery times, sorted once for all of them. */
function recipientDomainsOf(buckets: Bucket[]): string[] {
  const domains = new Set<string>();
  for (const b of buckets) for (const domain in (b.counts.dt ?? {}) as Counts) domains.add(domain);
  return [...domains].sort();
}

function deliveryTime(b: Bucket, domains: string[]) {
  const byDomain = (b.counts.dt ?? {}) as Record<string, Counts | undefined>;
  let ms = 0;
  let count = 0;
  const delivery_times = [];
  for (const recipient_domain of domains) {
    const d = byDomain[recipient_domain];
    if (d === undefined) continue;
    ms += n(d.ms);
    count += n(d.n);
    delivery_times.push({ recipient_domain, delivery_time: seconds(n(d.ms), n(d.n)), count: n(d.n) });
  }
  return { ...times(b), avg_delivery_time: seconds(ms, count), delivered_count: count, delivery_times };
}

function times(b: Bucket): { from_timestamp: string; to_timestamp: string } {
  return { from_timestamp: rfc3339(b.from), to_timestamp: rfc3339(b.to) };
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace('.000Z', 'Z');
}

function n(value: number | Counts | undefined): number {
  return typeof value === 'number' ? value : 0;
}

/** Average seconds, to the millisecond; 0 when nothing was delivered. */
function seconds(ms: number, count: number): number {
  return count === 0 ? 0 : Math.round(ms / count) / 1000;
}
