/** The clock, passed in so that policies and tests can control it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

const DAY_MS = 86_400_000;
/** Times from 1970 to the end of year 9999: their ISO text is `YYYY-MM-DD` and `THH:MM:SS.mmmZ`. */
const ISO_FAST_END = 253_402_300_800_000;
/** `YYYY-MM-DD` of the days formatted lately (a message's creation and its retention days), by day number. */
const isoDays = new Map<number, string>();
let isoTimeMs = Number.NaN;
let isoTimeText = '';

/**
 * ISO 8601 of a millisecond timestamp. The day and the time of day are kept apart: a busy moment
 * formats the same times many times, and a message's retention times share its creation's time of
 * day (whole days later).
 */
export function iso(ms: number): string {
  if (!(ms >= 0 && ms < ISO_FAST_END && Number.isInteger(ms))) return new Date(ms).toISOString(); // throws for an invalid time
  const timeMs = ms % DAY_MS;
  const day = (ms - timeMs) / DAY_MS;
  let date = isoDays.get(day);
  if (date === undefined) {
    if (isoDays.size >= 64) isoDays.clear();
    date = new Date(ms - timeMs).toISOString().slice(0, 10);
    isoDays.set(day, date);
  }
  if (timeMs !== isoTimeMs) {
    isoTimeText = new Date(timeMs).toISOString().slice(10);
    isoTimeMs = timeMs;
  }
  return date + isoTimeText;
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
