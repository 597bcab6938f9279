import type { Next } from 'koa';
import { AppError } from '../../util/errors.ts';
import type { Clock } from '../../util/time.ts';
import { isFull, take, type Bucket, type RateLimit } from '../rate-limit-policy.ts';
import type { ApiContext } from '../context.ts';

export type RateClass = 'general' | 'statistics';
export type RateLimits = Record<RateClass, RateLimit>;

/** Per-account token buckets, one per rate class; all keys of an account share them. */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private sinceSweep = 0;

  constructor(
    private limits: RateLimits,
    private readonly clock: Clock,
  ) {}

  configure(limits: RateLimits): void {
    this.limits = limits;
  }

  /** Takes a token or throws 429 with Retry-After. */
  consume(accountId: string, rateClass: RateClass): void {
    const now = this.clock.now();
    const id = `${rateClass}:${accountId}`;
    const result = take(this.buckets.get(id), now, this.limits[rateClass]);
    this.buckets.set(id, result.bucket);
    if (++this.sinceSweep >= 10_000) this.sweep(now);
    if (!result.allowed) {
      throw new AppError(429, 'Too many requests, rate limited.', { 'Retry-After': String(result.retryAfterSeconds) });
    }
  }

  /** Forgets buckets that have refilled: memory stays bounded by the recently active accounts. */
  private sweep(now: number): void {
    this.sinceSweep = 0;
    for (const [id, bucket] of this.buckets) {
      const rateClass = id.slice(0, id.indexOf(':')) as RateClass;
      if (isFull(bucket, now, this.limits[rateClass])) this.buckets.delete(id);
    }
  }
}

export function rateLimit(limiter: RateLimiter, rateClass: RateClass) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    limiter.consume(ctx.state.auth!.account.id, rateClass);
    await next();
  };
}
