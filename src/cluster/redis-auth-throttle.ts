import { randomBytes } from 'node:crypto';
import { AuthThrottle, type AuthFailures } from '../smtp/auth-throttle.ts';
import type { Clock } from '../util/time.ts';
import type { RedisLink } from './redis-link.ts';
import { COUNT_FAILURES } from './scripts.ts';

/**
 * Failed SMTP AUTH attempts per client address counted across the cluster in Redis, in the same
 * sliding window as on one node (scripts.ts COUNT_FAILURES): a guesser that spreads its attempts
 * over the nodes meets the same limit. While Redis cannot be asked, each node counts against its
 * share of the limit (AuthThrottle with live nodes).
 */
export class RedisAuthThrottle implements AuthFailures {
  private readonly share: AuthThrottle;
  private readonly node = randomBytes(6).toString('hex');
  private sequence = 0;

  constructor(
    private readonly link: RedisLink,
    private readonly limit: number,
    private readonly windowMs: number,
    clock: Clock,
    liveNodes: () => number,
  ) {
    this.share = new AuthThrottle(limit, windowMs, clock, liveNodes);
  }

  async blocked(address: string): Promise<boolean> {
    const count = await this.count(address, '');
    return count === null ? this.share.blocked(address) : count >= this.limit;
  }

  async fail(address: string): Promise<void> {
    // Counted here too: the share knows of it if Redis goes away.
    this.share.fail(address);
    await this.count(address, `${this.node}:${(this.sequence += 1)}`);
  }

  async succeed(address: string): Promise<void> {
    this.share.succeed(address);
    if (!this.link.usable) return;
    await this.link.call((redis) => redis.del(this.key(address))).catch(() => undefined);
  }

  /** The failures within the window after recording `id` (if any); null when Redis could not be asked. */
  private async count(address: string, id: string): Promise<number | null> {
    if (this.link.usable) {
      try {
        return Number(await this.link.run(COUNT_FAILURES, [this.key(address)], [this.windowMs, id]));
      } catch {
        // The link backs off; this node's share decides.
      }
    }
    this.link.fellBack();
    return null;
  }

  private key(address: string): string {
    return this.link.key('smtp-auth-failures', address);
  }
}
