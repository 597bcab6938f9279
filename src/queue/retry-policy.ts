/**
 * When a deferred message is tried next: a pure function of its attempt count and age, so the
 * schedule is testable and the same after a restart.
 */
export interface RetryPolicy {
  /** Delay after the first failed attempt; it doubles per attempt up to `maxDelayMs`. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** No attempt is made later than this after acceptance (unless the message expires sooner). */
  maxAgeMs: number;
  /** Spread of each delay: 0.2 means ±20 %, so deferred mail does not come back in waves. */
  jitter: number;
}

export interface RetryInput {
  /** Attempts made so far, including the one that just deferred (≥ 1). */
  attempts: number;
  createdAt: number;
  now: number;
  /** The message's own `schedule.expires`, when it has one. */
  expiresAt: number | null;
  /** A wait the server asked for ("try again in 10 minutes"), in ms. */
  hintMs?: number | undefined;
}

/** The time of the next attempt, or null when there is none left: the message then fails. */
export function nextAttemptAt(input: RetryInput, policy: RetryPolicy, random: () => number = Math.random): number | null {
  const deadline = Math.min(input.createdAt + policy.maxAgeMs, input.expiresAt ?? Number.POSITIVE_INFINITY);
  if (input.now >= deadline) return null;
  const exponent = Math.min(Math.max(input.attempts - 1, 0), 30);
  const base = Math.min(policy.firstDelayMs * 2 ** exponent, policy.maxDelayMs);
  const spread = 1 + policy.jitter * (2 * random() - 1);
  const delay = Math.max(Math.round(base * spread), input.hintMs ?? 0, 1000);
  const next = input.now + delay;
  if (next <= deadline) return next;
  // One last try at the deadline when there is still a useful wait before it.
  return deadline - input.now >= Math.min(policy.firstDelayMs, delay) / 2 ? deadline : null;
}

/** The wait a reply asks for: parsed with the other reply rules, in bounce/. */
export { retryHintMs } from '../bounce/retry-hint.ts';

/**
 * The retry schedule of an HTTP job kind (reference-api §5.4): after n failed attempts the next
 * one comes n^exponent seconds later, ±jitter; `attempts` in all.
 */
export interface HttpSchedule {
  attempts: number;
  exponent: number;
  jitter: number;
}

/** Each HTTP kind's schedule, as data: webhooks 6 attempts over ≈16 minutes, routes 12 over ≈11 hours. */
export const HTTP_SCHEDULES = {
  webhook: { attempts: 6, exponent: 4, jitter: 0.1 },
  route: { attempts: 12, exponent: 4, jitter: 0.1 },
} as const satisfies Record<string, HttpSchedule>;

/** When to try again after `failed` failed attempts (≥ 1), or null when none is left. */
export function nextHttpAttemptAt(failed: number, now: number, schedule: HttpSchedule, random: () => number = Math.random): number | null {
  if (failed >= schedule.attempts) return null;
  const base = failed ** schedule.exponent * 1000;
  return now + Math.round(base * (1 + schedule.jitter * (2 * random() - 1)));
}

/**
 * How long an outcome that could not be stored waits before it is written again: 0.5 s doubling
 * to 30 s. Never the next attempt at once: the message was perhaps delivered.
 */
export function outcomeRetryDelayMs(failures: number): number {
  return Math.min(500 * 2 ** Math.min(Math.max(failures - 1, 0), 16), 30_000);
}
