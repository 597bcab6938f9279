/** The clock, passed in so that policies and tests can control it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Fixed-width, lexicographically ordered encoding of a millisecond timestamp for store keys. */
export function timeKey(ms: number): string {
  return Math.max(0, Math.floor(ms)).toString().padStart(15, '0');
}
