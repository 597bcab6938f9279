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

/** `2026-11-25T10:00:00.123Z` → `2026-11-25T10:00:00.123000000Z`. */
export function nanoseconds(iso: string): string {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/.exec(iso);
  if (!m) return iso;
  return `${m[1]}.${(m[2] ?? '').padEnd(9, '0')}Z`;
}
