import type { RateLimit } from '../api/rate-limit-policy.ts';
import type { Clock } from '../util/time.ts';
import { LocalBuckets, type BucketSource, type TokenBuckets, type Verdict } from './buckets.ts';
import type { RedisLink } from './redis-link.ts';
import { TAKE_TOKENS } from './scripts.ts';

/**
 * Token buckets in Redis, one per id (`<prefix>:<purpose>:<id>`), shared by every node: each
 * take is one script run, atomic on the server, awaited by the caller. While Redis cannot be
 * asked (down, or backing off after a failure) the node answers from its own share of the
 * limit (limit ÷ live nodes), never with an error.
 */
export class RedisBuckets implements TokenBuckets<Promise<Verdict>> {
  private limit: RateLimit;
  private readonly share: LocalBuckets;

  constructor(
    private readonly link: RedisLink,
    private readonly purpose: string,
    limit: RateLimit,
    clock: Clock,
    liveNodes: () => number,
  ) {
    this.limit = limit;
    this.share = new LocalBuckets(limit, clock, liveNodes);
  }

  configure(limit: RateLimit): void {
    this.limit = limit;
    this.share.configure(limit);
  }

  take(id: string): Promise<Verdict> {
    return this.ask(id, 1, () => this.share.take(id));
  }

  peek(id: string): Promise<Verdict> {
    return this.ask(id, 0, () => this.share.peek(id));
  }

  private async ask(id: string, want: number, alone: () => Verdict): Promise<Verdict> {
    if (!this.link.usable) return this.fallBack(alone);
    const { per_second, burst } = this.limit;
    let reply: unknown;
    try {
      reply = await this.link.run(TAKE_TOKENS, [this.link.key(this.purpose, id)], [per_second, burst, want]);
    } catch {
      return this.fallBack(alone);
    }
    const [taken, waitMs] = reply as [number, number];
    if (want === 0 ? waitMs === 0 : taken >= want) return { allowed: true };
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
  }

  private fallBack(alone: () => Verdict): Verdict {
    this.link.fellBack();
    return alone();
  }
}

/** Buckets in Redis through `link`, with this node's share as the fallback. */
export function redisBuckets(link: RedisLink, clock: Clock, liveNodes: () => number): BucketSource<Promise<Verdict>> {
  return { buckets: (purpose, limit) => new RedisBuckets(link, purpose, limit, clock, liveNodes) };
}
