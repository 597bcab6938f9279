import type { Clock } from '../util/time.ts';
import type { DestinationLimits } from './job-kind.ts';
import { splitLane } from './lane.ts';
import type { LaneLimits } from './shaping/lane-shaping.ts';

/** A destination's rate tokens: `tokens` as of `at` (ms). */
export interface RateBucket {
  tokens: number;
  at: number;
}

/**
 * Takes a token of the destination's bucket, refilled at `rate` per second up to max(rate, 1)
 * (made full when missing): 0 when taken, else the ms until one is there.
 */
export function takeRateToken(buckets: Map<string, RateBucket>, destination: string, rate: number, now: number): number {
  const bucket = buckets.get(destination) ?? { tokens: Math.max(rate, 1), at: now };
  bucket.tokens = Math.min(Math.max(rate, 1), bucket.tokens + ((now - bucket.at) / 1000) * rate);
  bucket.at = now;
  buckets.set(destination, bucket);
  if (bucket.tokens >= 1) {
    bucket.tokens -= 1;
    return 0;
  }
  return ((1 - bucket.tokens) / rate) * 1000;
}

/**
 * What holds a destination's jobs back, apart from the dispatcher's limits: its own limits
 * (`delivery.destinations`: concurrency, rate, with the rate's tokens), a suspension by the
 * operator, and a pause while it is found down.
 */
export class DestinationStates {
  private readonly suspended: Set<string>;
  /** Destinations found down, with when to try them again (the kind that found it decides). */
  private readonly paused = new Map<string, number>();
  private readonly buckets = new Map<string, RateBucket>();

  constructor(
    private readonly limits: Record<string, DestinationLimits>,
    suspended: Iterable<string>,
    private readonly clock: Clock,
    /** Traffic shaping (queue/shaping/): its provider's limits under the operator's, lowered while a reply throttles it. */
    private readonly shaping?: LaneLimits,
  ) {
    this.suspended = new Set(suspended);
  }

  /**
   * The destination's limits: the operator's own, if any (a lane, source/destination, has its
   * destination's unless named itself), with shaping's.
   */
  limitsOf(destination: string): DestinationLimits | undefined {
    const own = this.limits[destination] ?? this.limits[splitLane(destination).destination];
    return this.shaping ? this.shaping.limitsOf(destination, own) : own;
  }

  /** Takes a token of the destination's rate: 0 when taken, else the ms until one is there. */
  take(destination: string, rate: number): number {
    return takeRateToken(this.buckets, destination, rate, this.clock.now());
  }

  /** Suspended by the operator, or paused as down. */
  held(destination: string, now: number): boolean {
    return this.isSuspended(destination) || (this.paused.get(destination) ?? 0) > now;
  }

  /** Paused as down, and not suspended: jobs read for it now are parked (JobKind.setAside). */
  down(destination: string, now: number): boolean {
    return !this.isSuspended(destination) && (this.paused.get(destination) ?? 0) > now;
  }

  suspend(destination: string): void {
    this.suspended.add(destination);
  }

  /** False when it was not suspended. */
  resume(destination: string): boolean {
    return this.suspended.delete(destination);
  }

  /** Suspended itself, or, a lane, with its destination: suspending a destination holds every source's lane of it. */
  isSuspended(destination: string): boolean {
    return this.suspended.has(destination) || (this.suspended.size > 0 && this.suspended.has(splitLane(destination).destination));
  }

  /** No job starts before `untilMs`; false when the destination was paused as long already. */
  pause(destination: string, untilMs: number): boolean {
    if ((this.paused.get(destination) ?? 0) >= untilMs) return false;
    this.paused.set(destination, untilMs);
    return true;
  }

  /** The pause ends now; false when there was none. */
  unpause(destination: string): boolean {
    return this.paused.delete(destination);
  }

  /** Ends the pauses that are over; `ended` is told of each destination no longer held. */
  endPauses(now: number, ended: (destination: string) => void): void {
    for (const [destination, until] of this.paused) {
      if (until > now) continue;
      this.paused.delete(destination);
      if (this.isSuspended(destination)) continue;
      ended(destination);
    }
  }

  /** Until when the destination is paused as down, or null. */
  pausedUntil(destination: string): number | null {
    const until = this.paused.get(destination) ?? 0;
    return until > this.clock.now() ? until : null;
  }

  /** The destinations suspended or paused (once each per list; one may be in both). */
  heldNames(): string[] {
    return [...this.suspended, ...this.paused.keys()];
  }
}
