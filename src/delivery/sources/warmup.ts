/** A source's warm-up (delivery.sources.*.warmup): from its first day on, a cap per day (UTC). */
export interface Warmup {
  /** Midnight UTC of the first day. */
  startMs: number;
  dailyCaps: readonly number[];
}

const DAY_MS = 86_400_000;

/** The UTC day of `ms`, as "YYYY-MM-DD". */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Midnight UTC after `ms`: when the next day's cap begins. */
export function nextDayMs(ms: number): number {
  return (Math.floor(ms / DAY_MS) + 1) * DAY_MS;
}

/**
 * Messages the source may send on the day of `now`: the cap of its warm-up day (before the first
 * day, the first cap), or null once the schedule is over (warm: no cap). Pure.
 */
export function warmupCap(warmup: Warmup | null, now: number): number | null {
  if (!warmup) return null;
  const day = Math.floor((now - warmup.startMs) / DAY_MS);
  if (day >= warmup.dailyCaps.length) return null;
  return warmup.dailyCaps[Math.max(day, 0)]!;
}
