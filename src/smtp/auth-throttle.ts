import { Lru } from '../util/lru.ts';
import type { Clock } from '../util/time.ts';

/** Client addresses tracked at most: past it, the least recently seen is forgotten (memory stays bounded). */
const MAX_CLIENTS = 10_000;

/**
 * Failed AUTH attempts per client address within a sliding window. Past the limit the client is
 * refused AUTH until its oldest failure leaves the window; a success clears its record.
 */
export class AuthThrottle {
  private readonly failures = new Lru<string, number[]>(MAX_CLIENTS);

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  blocked(address: string): boolean {
    return this.recent(address).length >= this.limit;
  }

  fail(address: string): void {
    const list = this.recent(address);
    list.push(this.clock.now());
    this.failures.set(address, list);
  }

  succeed(address: string): void {
    this.failures.delete(address);
  }

  private recent(address: string): number[] {
    const since = this.clock.now() - this.windowMs;
    const list = (this.failures.get(address) ?? []).filter((t) => t > since);
    if (list.length === 0) this.failures.delete(address);
    else this.failures.set(address, list);
    return list;
  }
}
