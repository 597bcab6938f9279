import type { Next } from 'koa';
import { AppError } from '../../util/errors.ts';
import type { Clock } from '../../util/time.ts';
import type ipaddr from 'ipaddr.js';
import { addressBucket, type RateLimit } from '../rate-limit-policy.ts';
import { localBuckets, type BucketSource, type Settled, type TokenBuckets, type Verdict } from '../../cluster/buckets.ts';
import { andThen, type Maybe } from '../../util/maybe.ts';
import type { ApiContext } from '../context.ts';

export type RateClass = 'general' | 'statistics';
export type RateLimits = Record<RateClass, RateLimit>;

/**
 * Per-account token buckets, one per rate class; all keys of an account share them. The buckets
 * are this node's memory (no source given: it answers at once), or a cluster's (cluster/), whose
 * answers may be promises (`A`).
 */
export class RateLimiter<A extends Maybe<Verdict> = Verdict> {
  private readonly buckets: Record<RateClass, TokenBuckets<A>>;

  constructor(limits: RateLimits, clock: Clock, source?: BucketSource<A>) {
    const from = source ?? inMemory<A>(clock);
    this.buckets = { general: from.buckets('api-rate:general', limits.general), statistics: from.buckets('api-rate:statistics', limits.statistics) };
  }

  configure(limits: RateLimits): void {
    for (const rateClass of RATE_CLASSES) this.buckets[rateClass].configure(limits[rateClass]);
  }

  /** Takes a token or throws 429 with Retry-After (at once in memory; the promise rejects when shared). */
  consume(accountId: string, rateClass: RateClass): Settled<A, void> {
    return andThen(this.buckets[rateClass].take(accountId), admit) as Settled<A, void>;
  }
}

/** A limiter over any buckets, answering at once or not: what the middleware and the app take. */
export type AnyRateLimiter = RateLimiter<Maybe<Verdict>>;
export type AnyRefusalLimiter = RefusalLimiter<Maybe<Verdict>>;

const RATE_CLASSES: readonly RateClass[] = ['general', 'statistics'];

/** The buckets of a limiter given no source: this node's memory, whose answers are Verdicts (`A`'s default). */
function inMemory<A extends Maybe<Verdict>>(clock: Clock): BucketSource<A> {
  // A source is given whenever A is not Verdict (the assemblies pass SharedLimits.buckets, or nothing).
  return localBuckets(clock) as unknown as BucketSource<A>;
}

function admit(verdict: Verdict): void {
  if (!verdict.allowed) throw new AppError(429, 'Too many requests, rate limited.', { 'Retry-After': String(verdict.retryAfterSeconds) });
}

/**
 * Refused authentications per client address (an IPv6 client's /64). Only refusals take tokens;
 * an address that has none left is refused with 429 before its credentials are looked at, until
 * the bucket refills: a key guesser (or a client stuck with a revoked key) costs one cheap check
 * per request, and a valid key from that address waits as well.
 */
export class RefusalLimiter<A extends Maybe<Verdict> = Verdict> {
  private readonly buckets: TokenBuckets<A>;

  constructor(limit: RateLimit, clock: Clock, source?: BucketSource<A>) {
    this.buckets = (source ?? inMemory<A>(clock)).buckets('api-refusals', limit);
  }

  configure(limit: RateLimit): void {
    this.buckets.configure(limit);
  }

  /** Throws 429 with Retry-After when the address has used up its refusals; takes nothing. */
  check(ip: ipaddr.IPv4 | ipaddr.IPv6): Settled<A, void> {
    return andThen(this.buckets.peek(addressBucket(ip)), refuseIfSpent) as Settled<A, void>;
  }

  /** Counts one refused authentication against the address. */
  refused(ip: ipaddr.IPv4 | ipaddr.IPv6): Settled<A, void> {
    return andThen(this.buckets.take(addressBucket(ip)), ignore) as Settled<A, void>;
  }
}

function refuseIfSpent(verdict: Verdict): void {
  if (!verdict.allowed) {
    throw new AppError(429, 'Too many failed authentications from this address, rate limited.', {
      'Retry-After': String(verdict.retryAfterSeconds),
    });
  }
}

function ignore(): void {}

export function rateLimit(limiter: AnyRateLimiter, rateClass: RateClass) {
  // Not async: the chain (koa-compose) turns a throw into a rejection, and next's promise is passed on.
  return (ctx: ApiContext, next: Next): Promise<void> => {
    const consumed = limiter.consume(ctx.state.auth!.account.id, rateClass);
    // In memory the answer is known: no promise, no turn of the microtask queue.
    return consumed ? consumed.then(() => next()) : next();
  };
}
