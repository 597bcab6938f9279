import { randomBytes } from 'node:crypto';
import type { Clock } from '../util/time.ts';
import { nodeCount } from './node-share.ts';
import type { RedisLink } from './redis-link.ts';
import { ACQUIRE_LEASES, RENEW_LEASES } from './scripts.ts';

export interface LeaseSettings {
  /** A lease not renewed within this long expires (default 15 s): the slots of a node that died come back. */
  leaseMs: number;
  /** Leases held are renewed this often (default a third of leaseMs). */
  renewMs: number;
  /** A lease no job uses is given back after this long (default 50 ms), unless a job of its destination takes it. */
  lingerMs: number;
  /** After Redis granted nothing (every slot held elsewhere), asked again after this long (default 100 ms). */
  retryMs: number;
  /** What a caller is told to wait while leases are on their way (default 10 ms). */
  pollMs: number;
}

export const LEASE_DEFAULTS: LeaseSettings = { leaseMs: 15_000, renewMs: 5000, lingerMs: 50, retryMs: 100, pollMs: 10 };

interface Slots {
  /** Leases held, no job using them. */
  idle: string[];
  /** Leases a job uses. */
  busy: Set<string>;
  asking: boolean;
  notBefore: number;
  trim: NodeJS.Timeout | null;
}

/**
 * Destinations' connection slots as leases in Redis (scripts.ts ACQUIRE_LEASES): a sorted set of
 * lease ids per destination scored by their expiry, at most `concurrency` of them live. A node
 * asks for up to its fair share at a time (concurrency ÷ live nodes), more when it needs them;
 * jobs take the leases held from memory, synchronously; a lease no job uses is given back soon
 * after (lingerMs), and every lease held is renewed while held. A node that dies renews nothing:
 * its leases expire after leaseMs and their slots go to the others.
 */
export class SlotLeases {
  private readonly slots = new Map<string, Slots>();
  private renewTimer: NodeJS.Timeout | null = null;
  /** This node's part of its lease ids (`<node>:<n>`): unique without asking anyone. */
  private readonly node = randomBytes(6).toString('hex');
  private sequence = 0;

  constructor(
    private readonly link: RedisLink,
    private readonly liveNodes: () => number,
    private readonly clock: Clock,
    private readonly settings: LeaseSettings = LEASE_DEFAULTS,
  ) {}

  start(): void {
    this.renewTimer ??= setInterval(() => this.renew(), this.settings.renewMs);
    this.renewTimer.unref();
  }

  /** A slot's release function, or the ms before asking again. */
  enter(destination: string, concurrency: number): (() => void) | number {
    let slots = this.slots.get(destination);
    if (!slots) {
      slots = { idle: [], busy: new Set(), asking: false, notBefore: 0, trim: null };
      this.slots.set(destination, slots);
    }
    const id = slots.idle.pop();
    if (id !== undefined) {
      slots.busy.add(id);
      const held = slots;
      return () => this.leave(destination, held, id);
    }
    const now = this.clock.now();
    this.acquire(destination, slots, concurrency, now);
    return slots.asking ? this.settings.pollMs : Math.max(1, slots.notBefore - now);
  }

  /** Leases held now (idle or in use), over every destination. */
  get held(): number {
    let n = 0;
    for (const slots of this.slots.values()) n += slots.idle.length + slots.busy.size;
    return n;
  }

  /** Stops renewing and gives every lease back (the jobs have ended). */
  async close(): Promise<void> {
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = null;
    const giving: Array<Promise<unknown>> = [];
    for (const [destination, slots] of this.slots) {
      if (slots.trim) clearTimeout(slots.trim);
      const ids = [...slots.idle, ...slots.busy];
      if (ids.length > 0 && this.link.usable) giving.push(this.giveBack(destination, ids));
    }
    this.slots.clear();
    await Promise.all(giving);
  }

  private acquire(destination: string, slots: Slots, concurrency: number, now: number): void {
    if (slots.asking || now < slots.notBefore) return;
    const held = slots.idle.length + slots.busy.size;
    // Its fair share first; the others may need theirs. Past it, one more each time it runs short.
    const want = Math.min(concurrency - held, Math.max(1, Math.ceil(concurrency / nodeCount(this.liveNodes())) - held));
    if (want <= 0) {
      slots.notBefore = now + this.settings.retryMs;
      return;
    }
    const ids = Array.from({ length: want }, () => `${this.node}:${(this.sequence += 1)}`);
    slots.asking = true;
    this.link.run(ACQUIRE_LEASES, [this.key(destination)], [concurrency, this.settings.leaseMs, ...ids]).then(
      (reply) => {
        slots.asking = false;
        const granted = reply as string[];
        if (granted.length === 0) slots.notBefore = this.clock.now() + this.settings.retryMs;
        if (this.slots.get(destination) !== slots) {
          // Closed meanwhile: not kept.
          if (granted.length > 0) void this.giveBack(destination, granted);
          return;
        }
        slots.idle.push(...granted);
        this.lingerThenTrim(destination, slots);
      },
      () => {
        slots.asking = false;
        slots.notBefore = this.clock.now() + this.settings.retryMs;
      },
    );
  }

  private leave(destination: string, slots: Slots, id: string): void {
    // A lease lost meanwhile (renew-leases said so) is not put back.
    if (!slots.busy.delete(id)) return;
    slots.idle.push(id);
    this.lingerThenTrim(destination, slots);
  }

  /** Gives back, after a moment, the leases no job has taken by then; forgets a destination holding none. */
  private lingerThenTrim(destination: string, slots: Slots): void {
    if (slots.trim || slots.idle.length === 0) return;
    slots.trim = setTimeout(() => {
      slots.trim = null;
      const ids = slots.idle.splice(0);
      if (ids.length > 0) void this.giveBack(destination, ids);
      if (slots.busy.size === 0 && !slots.asking && this.slots.get(destination) === slots) this.slots.delete(destination);
    }, this.settings.lingerMs);
    slots.trim.unref();
  }

  private giveBack(destination: string, ids: string[]): Promise<unknown> {
    // Not given back (Redis down): they expire there after leaseMs.
    return this.link.call((redis) => redis.zrem(this.key(destination), ...ids)).catch(() => undefined);
  }

  /** Renews the leases held; forgets the destinations holding none (one refused a slot, never granted one). */
  private renew(): void {
    for (const [destination, slots] of this.slots) {
      const ids = [...slots.idle, ...slots.busy];
      if (ids.length === 0 && !slots.asking && !slots.trim) this.slots.delete(destination);
      if (ids.length === 0 || !this.link.usable) continue;
      this.link.run(RENEW_LEASES, [this.key(destination)], [this.settings.leaseMs, ...ids]).then(
        (reply) => {
          for (const id of reply as string[]) {
            slots.busy.delete(id);
            const at = slots.idle.indexOf(id);
            if (at >= 0) slots.idle.splice(at, 1);
          }
        },
        // Kept until Redis answers again: if that is within leaseMs, they were never lost.
        () => undefined,
      );
    }
  }

  private key(destination: string): string {
    return this.link.key('destination-slots', destination);
  }
}
