import type { Logger } from 'pino';
import { Lru } from '../../util/lru.ts';
import { iso, type Clock } from '../../util/time.ts';
import type { DestinationLimits } from '../job-kind.ts';
import { matchReply, providerOfHost, providerOfLane, type Provider, type ProviderLimits, type ThrottleAction } from './rules.ts';
import { renewThrottle, throttledLimits, type Throttle } from './throttle.ts';

/** Shaping as the operator sees it on a lane (`queue status`): the provider whose rules apply, and a throttle in force. */
export interface ShapingView {
  provider: string;
  throttle: {
    rule: string;
    action: ThrottleAction;
    /** The reply that started it, or renewed it last. */
    reply: string;
    since: string;
    /** Slowed, or suspended, until then… */
    until: string;
    /** …then back to the lane's own limits by then. */
    ramp_until: string;
  } | null;
}

/** What the engine asks of shaping: a lane's limits, and what to show of it. */
export interface LaneLimits {
  /** The lane's limits: the operator's own (`delivery.destinations`, field by field) over its provider's, lowered by a throttle in force. */
  limitsOf(lane: string, own: DestinationLimits | undefined): DestinationLimits | undefined;
  view(lane: string): ShapingView | null;
  /** The lanes under a throttle now (shown even with no job in memory). */
  throttledLanes(): string[];
}

/** A throttle a reply started or renewed on a lane. */
export interface ThrottleChange {
  lane: string;
  throttle: Throttle;
  /** A new throttle (or another rule's), not one held longer. */
  started: boolean;
}

/** Lanes and hosts whose provider is kept in memory at most. */
const KEPT = 20_000;
/** Replies are kept this long at most (they are shown and logged). */
const REPLY_CHARS = 300;

/**
 * The shaping of lanes: each lane's provider (by the MX-host suffixes of its destination), its
 * limits, and the throttles that replies put on it. A throttle is held per lane, so per source and
 * destination: another source, or another destination, is not slowed by it.
 */
export class LaneShaping implements LaneLimits {
  private readonly lanes = new Lru<string, Provider | null>(KEPT);
  private readonly hosts = new Lru<string, Provider | null>(KEPT);
  private readonly throttles = new Map<string, Throttle>();

  constructor(
    private readonly providers: readonly Provider[],
    /** A lane's concurrency when neither the operator nor its provider set one (delivery.per_destination). */
    private readonly defaultConcurrency: number,
    private readonly clock: Clock,
  ) {}

  limitsOf(lane: string, own: DestinationLimits | undefined): DestinationLimits | undefined {
    const provider = this.providerOf(lane);
    const base = provider ? over(own, provider.limits) : own;
    if (this.throttles.size === 0) return base;
    const throttle = this.throttles.get(lane);
    if (!throttle) return base;
    const limits = throttledLimits({ concurrency: base?.concurrency ?? this.defaultConcurrency, rate: base?.rate }, throttle, this.clock.now());
    if (limits) return limits;
    this.throttles.delete(lane);
    return base;
  }

  /** The messages one connection to the MX host carries at most, when its provider says. */
  messagesPerConnection(host: string): number | undefined {
    let provider = this.hosts.get(host);
    if (provider === undefined) {
      provider = providerOfHost(this.providers, host);
      this.hosts.set(host, provider);
    }
    return provider?.limits.messagesPerConnection;
  }

  /**
   * A reply had on the lane ("<code> <text>"): when a reply rule of its provider matches, the
   * lane's throttle starts or is held longer. Null when nothing changed.
   */
  observe(lane: string, code: number, response: string): ThrottleChange | null {
    const provider = this.providerOf(lane);
    if (!provider) return null;
    const rule = matchReply(provider, code, response);
    if (!rule) return null;
    const now = this.clock.now();
    const current = this.throttles.get(lane);
    const next = renewThrottle(current, provider.id, rule, response.slice(0, REPLY_CHARS), now);
    if (!next) return null;
    this.throttles.set(lane, next);
    return { lane, throttle: next, started: !current || current.rampUntil <= now || current.rule !== rule };
  }

  view(lane: string): ShapingView | null {
    const provider = this.providerOf(lane);
    const t = this.current(lane);
    if (!provider && !t) return null;
    return {
      provider: t?.provider ?? provider!.id,
      throttle: t
        ? { rule: t.rule.name, action: t.rule.action, reply: t.reply, since: iso(t.since), until: iso(t.holdUntil), ramp_until: iso(t.rampUntil) }
        : null,
    };
  }

  throttledLanes(): string[] {
    return [...this.throttles.keys()].filter((lane) => this.current(lane));
  }

  /** The lane's throttle in force, or null (one that is over is dropped). */
  private current(lane: string): Throttle | null {
    const t = this.throttles.get(lane);
    if (!t) return null;
    if (t.rampUntil > this.clock.now()) return t;
    this.throttles.delete(lane);
    return null;
  }

  private providerOf(lane: string): Provider | null {
    let provider = this.lanes.get(lane);
    if (provider === undefined) {
      provider = providerOfLane(this.providers, lane);
      this.lanes.set(lane, provider);
    }
    return provider;
  }
}

/** The operator's limits over the provider's, field by field. */
function over(own: DestinationLimits | undefined, provider: ProviderLimits): DestinationLimits {
  if (!own) return provider;
  return { concurrency: own.concurrency ?? provider.concurrency, rate: own.rate ?? provider.rate };
}

/** What a throttle's start or renewal does besides: suspends the lane in the engine, is logged and counted. */
export interface ThrottleEffects {
  /** No job of the lane starts before `untilMs` (the engine's pause). */
  pause(lane: string, untilMs: number): void;
  /** A throttle started (metrics). */
  count(provider: string, rule: string, action: ThrottleAction): void;
}

/**
 * The hook after a delivery attempt: its reply, on the lane it was filed under, may slow or
 * suspend that lane. Logged on the attempt's logger (its message and account).
 */
export function onAttemptReply(
  shaping: LaneShaping,
  effects: ThrottleEffects,
): (lane: string, attempt: { smtpCode: number; response: string }, log: () => Logger) => void {
  return (lane, attempt, log) => {
    if (attempt.smtpCode < 400) return;
    const change = shaping.observe(lane, attempt.smtpCode, attempt.response);
    if (!change) return;
    const { throttle: t } = change;
    if (t.rule.action === 'suspend') effects.pause(lane, t.holdUntil);
    const fields = {
      lane,
      provider: t.provider,
      rule: t.rule.name,
      action: t.rule.action,
      reply: t.reply,
      until: iso(t.holdUntil),
      ramp_until: iso(t.rampUntil),
    };
    if (!change.started) {
      log().debug(fields, 'shaping: throttle held longer');
      return;
    }
    effects.count(t.provider, t.rule.name, t.rule.action);
    log().warn(fields, t.rule.action === 'suspend' ? 'shaping: lane suspended after a throttling reply' : 'shaping: lane slowed after a throttling reply');
  };
}
