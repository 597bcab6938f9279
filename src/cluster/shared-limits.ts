import type { Logger } from 'pino';
import { AuthThrottle, type AuthFailures } from '../smtp/auth-throttle.ts';
import type { Clock } from '../util/time.ts';
import type { BorrowSettings } from './borrowed-rates.ts';
import { shareBuckets, type BucketSource } from './buckets.ts';
import { ShareGate, type DestinationGate } from './destination-gate.ts';
import { RedisAuthThrottle } from './redis-auth-throttle.ts';
import { redisBuckets } from './redis-buckets.ts';
import { RedisGate } from './redis-gate.ts';
import { RedisLink, type LinkStats, type RedisLinkOptions } from './redis-link.ts';
import type { LeaseSettings } from './slot-leases.ts';

export interface SharedLimitsOptions {
  /** `cluster.redis_url`: the limits are counted there; null or empty: each node keeps to its share (limit ÷ live nodes). */
  redisUrl: string | null;
  /** The live nodes of the cluster, this one included (from the heartbeats); read at each decision, taken as at least 1. */
  liveNodes: () => number;
  clock: Clock;
  log: Logger;
  /** Tuning, for tests above all: key prefix, command timeout, back-off; lease and borrowing times. */
  redis?: Partial<Pick<RedisLinkOptions, 'prefix' | 'commandTimeoutMs' | 'backoffMs'>>;
  leases?: Partial<LeaseSettings>;
  borrow?: Partial<BorrowSettings>;
}

/** Numbers for the metrics. */
export interface SharedLimitsStats {
  /** 'redis' (cluster-wide, falling back to the share while Redis cannot be asked) or 'share' (no Redis configured). */
  mode: 'redis' | 'share';
  /** Absent in 'share' mode. */
  redis?: LinkStats;
  /** Destination slots held as leases in Redis now. */
  leasesHeld: number;
  /** Destination slots taken from this node's share now (share mode, or while Redis could not be asked). */
  shareSlotsInUse: number;
}

/**
 * The limits of a node in a cluster, which the limiters are given in place of their in-memory
 * defaults: the API's token buckets (rate per account, refused authentications per address),
 * the SMTP submission's failed-AUTH count per address, and the job engine's destination gate
 * (rates and connection slots). With Redis they are counted across the cluster; without, or
 * while Redis cannot be asked, each node enforces its share (limit ÷ live nodes).
 *
 * Built before the assemblies that use it; `start()` before they start (it never fails: an
 * unreachable Redis is logged and the shares apply), `close()` once the job engine has stopped
 * (it gives the leases held back).
 */
export class SharedLimits {
  readonly buckets: BucketSource;
  readonly destinations: DestinationGate;
  /** With Redis: the connection and the gate over it. */
  private readonly redis: { link: RedisLink; gate: RedisGate } | null;
  /** Without: the gate of this node's share. */
  private readonly share: ShareGate | null;

  constructor(private readonly options: SharedLimitsOptions) {
    const { redisUrl, liveNodes, clock, log } = options;
    if (!redisUrl) {
      this.redis = null;
      this.share = new ShareGate(liveNodes, clock);
      this.buckets = shareBuckets(clock, liveNodes);
      this.destinations = this.share;
    } else {
      const link = new RedisLink({ url: redisUrl, log, ...options.redis });
      const gate = new RedisGate(link, liveNodes, clock, { leases: options.leases ?? {}, borrow: options.borrow ?? {} });
      this.redis = { link, gate };
      this.share = null;
      this.buckets = redisBuckets(link, clock, liveNodes);
      this.destinations = gate;
    }
  }

  /** Failed SMTP AUTH attempts per client address (`smtp.submission.auth_failures`). */
  authFailures(limit: number, windowMs: number): AuthFailures {
    const { clock, liveNodes } = this.options;
    if (this.redis) return new RedisAuthThrottle(this.redis.link, limit, windowMs, clock, liveNodes);
    return new AuthThrottle(limit, windowMs, clock, liveNodes);
  }

  async start(): Promise<void> {
    if (!this.redis) return;
    this.redis.gate.start();
    await this.redis.link.start();
  }

  stats(): SharedLimitsStats {
    if (!this.redis) return { mode: 'share', leasesHeld: 0, shareSlotsInUse: this.share!.slotsInUse };
    return { mode: 'redis', redis: this.redis.link.stats(), ...this.redis.gate.stats() };
  }

  async close(): Promise<void> {
    if (!this.redis) return;
    await this.redis.gate.close();
    await this.redis.link.close();
  }
}
