import type { Next } from 'koa';
import { AppError } from '../../util/errors.ts';
import type { Clock } from '../../util/time.ts';
import type ipaddr from 'ipaddr.js';
import { addressBucket, isFull, peek, take, type Bucket, type RateLimit } from '../rate-limit-policy.ts';
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

/**
 * Refused authentications per client address (an IPv6 client's /64). Only refusals take tokens;
 * an address that has none left is refused with 429 before its credentials are looked at, until
 * the bucket refills: a key guesser (or a client stuck with a revoked key) costs one cheap check
 * per request, and a valid key from that address waits as well.
 */
export class RefusalLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private sinceSweep = 0;

  constructor(
    private limit: RateLimit,
    private readonly clock: Clock,
  ) {}

  configure(limit: RateLimit): void {
    this.limit = limit;
  }

  /** Throws 429 with Retry-After when the address has used up its refusals; takes nothing. */
  check(ip: ipaddr.IPv4 | ipaddr.IPv6): void {
    const result = peek(this.buckets.get(addressBucket(ip)), this.clock.now(), this.limit);
    if (!result.allowed) {
      throw new AppError(429, 'Too many failed authentications from this address, rate limited.', {
        'Retry-After': String(result.retryAfterSeconds),
      });
    }
  }

  /** Counts one refused authentication against the address. */
  refused(ip: ipaddr.IPv4 | ipaddr.IPv6): void {
    const now = this.clock.now();
    const id = addressBucket(ip);
    this.buckets.set(id, take(this.buckets.get(id), now, this.limit).bucket);
    if (++this.sinceSweep >= 10_000) this.sweep(now);
  }

  /** Forgets buckets that have refilled: memory stays bounded by the recently refused addresses. */
  private sweep(now: number): void {
    this.sinceSweep = 0;
    for (const [id, bucket] of this.buckets) if (isFull(bucket, now, this.limit)) this.buckets.delete(id);
  }
}

export function rateLimit(limiter: RateLimiter, rateClass: RateClass) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    limiter.consume(ctx.state.auth!.account.id, rateClass);
    await next();
  };
}
