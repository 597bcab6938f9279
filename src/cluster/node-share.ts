import type { RateLimit } from '../api/rate-limit-policy.ts';

/**
 * A node's share of a cluster-wide limit when the nodes have nothing to count together (no
 * Redis, or Redis unreachable): each enforces the limit divided by the live nodes, so that the
 * cluster as a whole stays within it. Shares are never below one: a node can always let one
 * request, one refusal or one connection through, so with more nodes than the limit allows the
 * cluster's total exceeds it (by at most one per node).
 */

/** The live nodes as a divisor: a whole number, at least 1 (a node always counts itself). */
export function nodeCount(live: number): number {
  return Number.isFinite(live) && live >= 1 ? Math.floor(live) : 1;
}

/** A token bucket's share: the refill rate divided, the burst too (at least one token). */
export function rateShare(limit: RateLimit, nodes: number): RateLimit {
  const n = nodeCount(nodes);
  if (n === 1) return limit;
  return { per_second: limit.per_second / n, burst: Math.max(1, limit.burst / n) };
}

/** A count's share (connections at once, failures in a window): rounded down, at least 1. */
export function countShare(limit: number, nodes: number): number {
  return Math.max(1, Math.floor(limit / nodeCount(nodes)));
}
