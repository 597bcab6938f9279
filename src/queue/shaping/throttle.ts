import type { DestinationLimits } from '../job-kind.ts';
import type { ReplyRule, ThrottleAction } from './rules.ts';

/** A lane slowed or suspended by a reply: which rule, which reply, and its times (ms). */
export interface Throttle {
  provider: string;
  rule: ReplyRule;
  /** The reply that started it or renewed it last ("<code> <text>"). */
  reply: string;
  since: number;
  /** Held (slowed, or suspended) until then… */
  holdUntil: number;
  /** …then back to the lane's own limits by then. */
  rampUntil: number;
}

/** A lane's limits without a throttle: its concurrency always known (the dispatcher's default at least). */
export interface BaseLimits {
  concurrency: number;
  rate?: number | undefined;
}

/** Without a rate of its own to return to, a lane's rate climbs to this many times the slowed one, then the limit is lifted. */
const OPEN_RATE_FACTOR = 10;

/** A throttle started now by `rule` for `reply`. */
export function startThrottle(provider: string, rule: ReplyRule, reply: string, now: number): Throttle {
  return { provider, rule, reply, since: now, holdUntil: now + rule.holdMs, rampUntil: now + rule.holdMs + rule.rampMs };
}

/**
 * What a new match does to the lane's throttle: the same rule, or a suspension over a slow-down,
 * holds the lane from now for the rule's time (never shorter than it was held already); a
 * slow-down does not soften a suspension. Null: the current throttle stays as it is.
 */
export function renewThrottle(current: Throttle | undefined, provider: string, rule: ReplyRule, reply: string, now: number): Throttle | null {
  if (!current || current.rampUntil <= now) return startThrottle(provider, rule, reply, now);
  if (current.rule.action === 'suspend' && rule.action === 'slow' && current.holdUntil > now) return null;
  const next = startThrottle(provider, rule, reply, now);
  if (current.rule === rule) next.since = current.since;
  next.holdUntil = Math.max(next.holdUntil, current.holdUntil);
  next.rampUntil = Math.max(next.rampUntil, next.holdUntil + rule.rampMs);
  return next;
}

/**
 * The lane's limits under the throttle at `now`: the rule's slowed limits while held (never above
 * the lane's own), then rising evenly to the lane's own over the ramp. Null once it is over.
 */
export function throttledLimits(base: BaseLimits, t: Throttle, now: number): DestinationLimits | null {
  if (now >= t.rampUntil) return null;
  const slowConcurrency = Math.min(t.rule.slowed.concurrency, base.concurrency);
  const slowRate = minRate(t.rule.slowed.rate, base.rate);
  if (now < t.holdUntil) return { concurrency: slowConcurrency, rate: slowRate };
  const f = (now - t.holdUntil) / (t.rampUntil - t.holdUntil);
  const concurrency = Math.max(slowConcurrency, Math.floor(slowConcurrency + f * (base.concurrency - slowConcurrency)));
  if (slowRate === undefined) return { concurrency, rate: undefined };
  const target = base.rate ?? slowRate * OPEN_RATE_FACTOR;
  return { concurrency, rate: slowRate + f * (target - slowRate) };
}

function minRate(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}

/** Whether the lane is suspended by the throttle at `now` (no job starts). */
export function suspends(t: Throttle, now: number): boolean {
  return t.rule.action === 'suspend' && now < t.holdUntil;
}

export type { ThrottleAction };
