/** The clock, passed in so that policies and tests can control it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

let isoMs = Number.NaN;
let isoText = '';

/** ISO 8601 of a millisecond timestamp (the last one is kept: a busy moment formats the same time many times). */
export function iso(ms: number): string {
  if (ms !== isoMs) {
    // Throws for an invalid time, as toISOString does (NaN never equals the kept value).
    isoText = new Date(ms).toISOString();
    isoMs = ms;
  }
  return isoText;
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
