import { isFull, peek, take, type Bucket, type RateLimit } from '../api/rate-limit-policy.ts';
import type { Clock } from '../util/time.ts';
import type { Maybe } from '../util/maybe.ts';
import { rateShare } from './node-share.ts';

/** Whether a bucket had a token; if not, how many whole seconds (at least 1) until it has. */
export type Verdict = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/**
 * The token buckets of one purpose (one limit), one bucket per id (an account, a client
 * address). In memory the answer `A` is known at once (a Verdict); through Redis it is a promise.
 */
export interface TokenBuckets<A extends Maybe<Verdict> = Maybe<Verdict>> {
  /** Takes a token of the id's bucket if it has one. */
  take(id: string): A;
  /** Whether the id's bucket has a token, taking none. */
  peek(id: string): A;
  /** The limit from now on (a reload). */
  configure(limit: RateLimit): void;
}

/** Where the limiters get their buckets: this node's memory (the default), its share of a cluster's, or Redis. */
export interface BucketSource<A extends Maybe<Verdict> = Maybe<Verdict>> {
  /** The buckets of one purpose (`api-rate:general`, `api-refusals`: a key prefix in Redis). */
  buckets(purpose: string, limit: RateLimit): TokenBuckets<A>;
}

/** What a limiter over buckets answering `A` answers with `T`: at once when they do, else a promise. */
export type Settled<A extends Maybe<Verdict>, T> = A extends Promise<Verdict> ? Promise<T> : T;

/** Past this many takes, buckets that have refilled are forgotten: memory follows the recently active ids. */
const SWEEP_EVERY = 10_000;

/**
 * Buckets in this process's memory. With `nodes`, the limit is this node's share of a
 * cluster-wide one (node-share.ts), worked out at each take as the number of live nodes changes.
 */
export class LocalBuckets implements TokenBuckets<Verdict> {
  private readonly buckets = new Map<string, Bucket>();
  private sinceSweep = 0;

  constructor(
    private limit: RateLimit,
    private readonly clock: Clock,
    private readonly nodes?: () => number,
  ) {}

  configure(limit: RateLimit): void {
    this.limit = limit;
  }

  take(id: string): Verdict {
    const now = this.clock.now();
    const limit = this.current();
    const result = take(this.buckets.get(id), now, limit);
    this.buckets.set(id, result.bucket);
    if (++this.sinceSweep >= SWEEP_EVERY) this.sweep(now, limit);
    return result.allowed ? { allowed: true } : { allowed: false, retryAfterSeconds: result.retryAfterSeconds };
  }

  peek(id: string): Verdict {
    return peek(this.buckets.get(id), this.clock.now(), this.current());
  }

  /** The ids remembered now (bounded by the sweep). */
  get size(): number {
    return this.buckets.size;
  }

  private current(): RateLimit {
    return this.nodes ? rateShare(this.limit, this.nodes()) : this.limit;
  }

  private sweep(now: number, limit: RateLimit): void {
    this.sinceSweep = 0;
    for (const [id, bucket] of this.buckets) if (isFull(bucket, now, limit)) this.buckets.delete(id);
  }
}

/** One node on its own: the whole limit, in memory (what the limiters did before cluster mode). */
export function localBuckets(clock: Clock): BucketSource<Verdict> {
  return { buckets: (_purpose, limit) => new LocalBuckets(limit, clock) };
}

/** Several nodes with nothing shared between them: each enforces limit ÷ live nodes in its memory. */
export function shareBuckets(clock: Clock, liveNodes: () => number): BucketSource<Verdict> {
  return { buckets: (_purpose, limit) => new LocalBuckets(limit, clock, liveNodes) };
}
