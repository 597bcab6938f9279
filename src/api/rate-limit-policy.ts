/** A token bucket: `tokens` available as of `at` (ms). */
export interface Bucket {
  tokens: number;
  at: number;
}

export interface RateLimit {
  per_second: number;
  burst: number;
}

export type TakeResult =
  | { allowed: true; bucket: Bucket }
  | { allowed: false; bucket: Bucket; retryAfterSeconds: number };

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
