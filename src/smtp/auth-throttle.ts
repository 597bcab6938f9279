import { countShare } from '../cluster/node-share.ts';
import { Lru } from '../util/lru.ts';
import type { Maybe } from '../util/maybe.ts';
import type { Clock } from '../util/time.ts';

/** Client addresses tracked at most: past it, the least recently seen is forgotten (memory stays bounded). */
const MAX_CLIENTS = 10_000;

/**
 * What submission asks about failed AUTH attempts per client address: this node's count
 * (AuthThrottle), or the cluster's (cluster/redis-auth-throttle.ts), whose answers are promises.
 */
export interface AuthFailures {
  blocked(address: string): Maybe<boolean>;
  fail(address: string): Maybe<void>;
  succeed(address: string): Maybe<void>;
}

/**
 * Failed AUTH attempts per client address within a sliding window. Past the limit the client is
 * refused AUTH until its oldest failure leaves the window; a success clears its record. With
 * `liveNodes`, the limit is this node's share of a cluster-wide one (limit ÷ live nodes, at least 1).
 */
export class AuthThrottle implements AuthFailures {
  private readonly failures = new Lru<string, number[]>(MAX_CLIENTS);

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
    private readonly liveNodes?: () => number,
  ) {}

  blocked(address: string): boolean {
    return this.recent(address).length >= (this.liveNodes ? countShare(this.limit, this.liveNodes()) : this.limit);
  }

  fail(address: string): void {
    const list = this.recent(address);
    list.push(this.clock.now());
    this.failures.set(address, list);
  }

  succeed(address: string): void {
    this.failures.delete(address);
  }

  private recent(address: string): number[] {
    const since = this.clock.now() - this.windowMs;
    const list = (this.failures.get(address) ?? []).filter((t) => t > since);
    if (list.length === 0) this.failures.delete(address);
    else this.failures.set(address, list);
    return list;
  }
}
