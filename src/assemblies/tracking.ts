import type { Config } from '../config/schema.ts';
import type { HeldListener } from '../control/doctor-protocol.ts';
import { heldAt } from '../control/doctor-protocol.ts';
import { publishedPolicies } from '../domains/mta-sts-policy.ts';
import { TrackingHits } from '../tracking/hits.ts';
import type { Assembly, Context, Readiness } from './lifecycle.ts';

/**
 * Opens and clicks, when tracking is on: the listener's thread (bound since the bind phase)
 * answers from its start, and the hits it hands back are written here in batches.
 */
export class TrackingAssembly implements Assembly {
  readonly name = 'tracking';
  readonly sections = ['tracking'];
  private readonly hits: TrackingHits | null = null;

  constructor(private readonly ctx: Context) {
    const { config, core, log, bound } = ctx;
    if (!config.tracking.enabled) return;
    this.hits = new TrackingHits(
      core.trackedMessages,
      (ops) => core.store.commit(ops),
      core.events,
      core.clock,
      config.tracking.scanner_seconds * 1000,
      (err) => log.error({ err }, 'an open or click could not be recorded'),
      (count) => bound.tracking?.written(count),
    );
  }

  async start(): Promise<void> {
    const { config, core, log, metrics, bound } = this.ctx;
    const listener = bound.tracking;
    if (!this.hits || !listener) return;
    listener.serve(
      { tokenKey: core.trackingKey, trustedProxies: config.api.trusted_proxies, mtaStsPolicies: publishedPolicies(config) },
      { domains: core.domainsRepo, messages: core.trackedMessages, hits: this.hits, log, observer: metrics.tracking },
    );
    log.info({ url: listener.url }, 'tracking listening');
  }

  /** The listener's base URL (null when it is off). */
  get url(): string | null {
    return this.ctx.bound.tracking?.url ?? null;
  }

  /** Resolves once the opens and clicks answered so far are written. */
  async drained(): Promise<void> {
    await this.ctx.bound.tracking?.sync();
    await this.hits?.drain();
  }

  ready(): Readiness[] {
    return this.ctx.config.tracking.enabled ? [{ name: 'tracking', ok: this.ctx.bound.tracking?.running === true }] : [];
  }

  held(): HeldListener[] {
    const listener = this.ctx.bound.tracking;
    return listener ? [heldAt('tracking', listener.url)] : [];
  }

  /**
   * It takes the API's trusted proxies (api.trusted_proxies, live) for the client address of a
   * hit, and the MTA-STS policies it serves (mta_sts_policy, live).
   */
  reload(config: Config): () => string[] {
    return () => {
      this.ctx.bound.tracking?.configure(config.api.trusted_proxies, publishedPolicies(config));
      return [];
    };
  }

  async stopListening(graceMs: number): Promise<void> {
    await this.ctx.bound.tracking?.close(graceMs);
  }

  async drain(): Promise<void> {
    // Opens and clicks already answered are written before the store closes.
    await this.hits?.drain();
  }
}
