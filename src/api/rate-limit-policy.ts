import type ipaddr from 'ipaddr.js';

/** A token bucket: `tokens` available as of `at` (ms). */
export interface Bucket {
  tokens: number;
  at: number;
}

export interface RateLimit {
  per_second: number;
  burst: number;
}

export type TakeResult = { allowed: true; bucket: Bucket } | { allowed: false; bucket: Bucket; retryAfterSeconds: number };

/**
 * Refills the bucket for the time elapsed (capped at the burst) and takes one token if there is
 * one. Otherwise says how many whole seconds until a token is back.
 */
export function take(bucket: Bucket | undefined, now: number, limit: RateLimit): TakeResult {
  const elapsed = bucket ? Math.max(0, now - bucket.at) / 1000 : 0;
  const tokens = bucket ? Math.min(limit.burst, bucket.tokens + elapsed * limit.per_second) : limit.burst;
  if (tokens >= 1) return { allowed: true, bucket: { tokens: tokens - 1, at: now } };
  const wait = (1 - tokens) / limit.per_second;
  return { allowed: false, bucket: { tokens, at: now }, retryAfterSeconds: Math.max(1, Math.ceil(wait)) };
}

/** Whether a bucket has refilled completely and can be forgotten. */
export function isFull(bucket: Bucket, now: number, limit: RateLimit): boolean {
  return bucket.tokens + (Math.max(0, now - bucket.at) / 1000) * limit.per_second >= limit.burst;
}

/**
 * Whether the bucket holds a token now, without taking it; if not, how many whole seconds until
 * it does. Lets a caller refuse before doing the work whose failure would take the token.
 */
export function peek(bucket: Bucket | undefined, now: number, limit: RateLimit): { allowed: true } | { allowed: false; retryAfterSeconds: number } {
  if (!bucket) return { allowed: true };
  const tokens = Math.min(limit.burst, bucket.tokens + (Math.max(0, now - bucket.at) / 1000) * limit.per_second);
  if (tokens >= 1) return { allowed: true };
  return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / limit.per_second)) };
}

/**
 * The bucket name of a client address: an IPv4 address itself, an IPv6 address its /64 (one
 * host or site usually holds a whole /64, so counting single IPv6 addresses would count nothing).
 */
export function addressBucket(ip: ipaddr.IPv4 | ipaddr.IPv6): string {
  if (ip.kind() === 'ipv4') return ip.toString();
  const parts = (ip as ipaddr.IPv6).parts;
  return `${parts
    .slice(0, 4)
    .map((p) => p.toString(16))
    .join(':')}::/64`;
}
