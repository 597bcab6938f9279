import type { Clock } from '../util/time.ts';
import { BORROW_DEFAULTS, BorrowedRates, type BorrowSettings } from './borrowed-rates.ts';
import { ShareGate, type DestinationGate } from './destination-gate.ts';
import type { RedisLink } from './redis-link.ts';
import { LEASE_DEFAULTS, SlotLeases, type LeaseSettings } from './slot-leases.ts';

/**
 * Destinations' rates and slots counted across the cluster in Redis: rate tokens borrowed in
 * small batches (borrowed-rates.ts), slots as leases that expire unless renewed (slot-leases.ts).
 * The dispatcher's questions are answered from memory; what the node holds is topped up from
 * Redis in the background. While Redis cannot be asked, each node keeps to its share (ShareGate).
 */
export class RedisGate implements DestinationGate {
  private readonly rates: BorrowedRates;
  private readonly leases: SlotLeases;
  private readonly share: ShareGate;
  private sweepTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly link: RedisLink,
    liveNodes: () => number,
    clock: Clock,
    settings: { borrow?: Partial<BorrowSettings>; leases?: Partial<LeaseSettings> } = {},
  ) {
    const leaseSettings = { ...LEASE_DEFAULTS, ...settings.leases };
    if (settings.leases?.leaseMs !== undefined && settings.leases.renewMs === undefined) leaseSettings.renewMs = Math.ceil(leaseSettings.leaseMs / 3);
    this.rates = new BorrowedRates(link, clock, { ...BORROW_DEFAULTS, ...settings.borrow });
    this.leases = new SlotLeases(link, liveNodes, clock, leaseSettings);
    this.share = new ShareGate(liveNodes, clock);
  }

  start(): void {
    this.leases.start();
    this.sweepTimer ??= setInterval(() => this.rates.sweep(), 10_000);
    this.sweepTimer.unref();
  }

  take(destination: string, rate: number): number {
    if (this.link.usable) return this.rates.take(destination, rate);
    this.link.fellBack();
    return this.share.take(destination, rate);
  }

  enter(destination: string, concurrency: number): (() => void) | number {
    if (this.link.usable) return this.leases.enter(destination, concurrency);
    this.link.fellBack();
    return this.share.enter(destination, concurrency);
  }

  /** Slots held now: leases from Redis, and slots taken from this node's share while it could not be asked. */
  stats(): { leasesHeld: number; shareSlotsInUse: number } {
    return { leasesHeld: this.leases.held, shareSlotsInUse: this.share.slotsInUse };
  }

  async close(): Promise<void> {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    await this.leases.close();
  }
}
