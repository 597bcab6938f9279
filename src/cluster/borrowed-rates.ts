import type { Clock } from '../util/time.ts';
import type { RedisLink } from './redis-link.ts';
import { TAKE_TOKENS } from './scripts.ts';

export interface BorrowSettings {
  /** A batch is this long's worth of the rate (default 100 ms): fewer round trips, a finer share between nodes the smaller it is. */
  batchMs: number;
  /** Tokens borrowed and not used within this long are dropped (default 1 s): a node cannot save them up for a burst. */
  keepMs: number;
  /** What a caller is told to wait while a batch is on its way (default 10 ms). */
  pollMs: number;
}

export const BORROW_DEFAULTS: BorrowSettings = { batchMs: 100, keepMs: 1000, pollMs: 10 };

interface Borrowed {
  tokens: number;
  /** When the tokens held were borrowed. */
  at: number;
  asking: boolean;
  /** Redis had no token: not asked again before this. */
  notBefore: number;
}

/**
 * Destinations' rate tokens borrowed from their cluster-wide buckets in Redis in small batches,
 * so that the dispatcher takes them synchronously from memory: a batch is asked for when the
 * last token held is taken, or when none is held (the caller then waits `pollMs`). The buckets
 * are those of the API limits (scripts.ts TAKE_TOKENS, burst max(rate, 1) as on one node); what
 * a node borrows no other node can use, so batches are small and soon dropped.
 */
export class BorrowedRates {
  private readonly held = new Map<string, Borrowed>();

  constructor(
    private readonly link: RedisLink,
    private readonly clock: Clock,
    private readonly settings: BorrowSettings = BORROW_DEFAULTS,
  ) {}

  /** 0 when a token was taken; else the ms before asking again. */
  take(destination: string, rate: number): number {
    const now = this.clock.now();
    let state = this.held.get(destination);
    if (!state) {
      state = { tokens: 0, at: now, asking: false, notBefore: 0 };
      this.held.set(destination, state);
    }
    if (state.tokens >= 1 && now - state.at > this.settings.keepMs) state.tokens = 0;
    if (state.tokens >= 1) {
      state.tokens -= 1;
      // The last one: the next batch is on its way before it is needed.
      if (state.tokens < 1) this.borrow(destination, state, rate, now);
      return 0;
    }
    this.borrow(destination, state, rate, now);
    return state.asking ? this.settings.pollMs : Math.max(1, state.notBefore - now);
  }

  /** Forgets destinations holding nothing: memory follows the destinations in use. */
  sweep(): void {
    const now = this.clock.now();
    for (const [destination, state] of this.held) {
      if (!state.asking && (state.tokens < 1 || now - state.at > this.settings.keepMs) && now >= state.notBefore) this.held.delete(destination);
    }
  }

  private borrow(destination: string, state: Borrowed, rate: number, now: number): void {
    if (state.asking || now < state.notBefore) return;
    const burst = Math.max(rate, 1);
    const want = Math.max(1, Math.min(Math.floor(burst), Math.ceil((rate * this.settings.batchMs) / 1000)));
    state.asking = true;
    this.link.run(TAKE_TOKENS, [this.link.key('destination-rate', destination)], [rate, burst, want]).then(
      (reply) => {
        const [taken, waitMs] = reply as [number, number];
        const at = this.clock.now();
        state.asking = false;
        state.tokens = (at - state.at > this.settings.keepMs ? 0 : state.tokens) + taken;
        state.at = at;
        if (taken === 0) state.notBefore = at + Math.max(1, waitMs);
      },
      () => {
        // The link backs off; meanwhile the gate decides from this node's share.
        state.asking = false;
      },
    );
  }
}
