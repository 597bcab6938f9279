import { takeRateToken, type RateBucket } from '../queue/destination-states.ts';
import type { Clock } from '../util/time.ts';
import { countShare, nodeCount } from './node-share.ts';

/**
 * What the job engine's dispatcher asks, besides its own limits, before it starts a job of a
 * destination when several nodes deliver: a token of the destination's rate and one of its
 * connection slots, counted across the cluster. The dispatcher decides synchronously, so both
 * answer at once from what the node holds; a refusal says how long to wait before asking again
 * (the dispatcher's rate timer). One node on its own has no gate: its limits are its own.
 */
export interface DestinationGate {
  /** Takes a token of the destination's rate (`rate` jobs started per second): 0 when taken, else the ms before asking again. */
  take(destination: string, rate: number): number;
  /**
   * Takes one of the destination's `concurrency` slots: the function that gives it back (once
   * the job no longer uses a connection; calling it again does nothing), or the ms before asking again.
   */
  enter(destination: string, concurrency: number): (() => void) | number;
}

/** How long a destination whose share of slots is in use waits before asking again (a release on this node asks at once). */
const SHARE_FULL_RETRY_MS = 1000;

/**
 * Each node's share, with nothing shared between them: a destination's rate divided by the live
 * nodes, its slots too (at least one each, node-share.ts), counted in this node's memory.
 */
export class ShareGate implements DestinationGate {
  private readonly buckets = new Map<string, RateBucket>();
  private readonly inUse = new Map<string, number>();

  constructor(
    private readonly liveNodes: () => number,
    private readonly clock: Clock,
  ) {}

  take(destination: string, rate: number): number {
    return takeRateToken(this.buckets, destination, rate / nodeCount(this.liveNodes()), this.clock.now());
  }

  enter(destination: string, concurrency: number): (() => void) | number {
    const used = this.inUse.get(destination) ?? 0;
    if (used >= countShare(concurrency, this.liveNodes())) return SHARE_FULL_RETRY_MS;
    this.inUse.set(destination, used + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const still = (this.inUse.get(destination) ?? 1) - 1;
      if (still > 0) this.inUse.set(destination, still);
      else this.inUse.delete(destination);
    };
  }

  /** Slots in use on this node, over every destination. */
  get slotsInUse(): number {
    let n = 0;
    for (const used of this.inUse.values()) n += used;
    return n;
  }
}
