import type { Logger } from 'pino';
import type { BoundListeners } from '../bind-phase.ts';
import type { Config } from '../config/schema.ts';
import { heldAt, type HeldListener } from '../control/doctor-protocol.ts';
import { QueueAdmin } from '../control/queue-admin.ts';
import { MetricsListener } from '../metrics/listener.ts';
import { Metrics, type QueueSnapshot } from '../metrics/metrics.ts';
import { storageMetrics } from '../metrics/storage.ts';
import type { StorageGuard } from '../store/storage-guard.ts';
import { resolve } from 'node:path';
import type { Signals } from '../util/signals.ts';
import { jobStore, type Core } from './core.ts';
import type { Assembly, Context, DaemonSignals, Readiness } from './lifecycle.ts';

/**
 * The daemon's metrics and what feeds them from the core: store commits, landed delivery events,
 * DKIM signatures, the queue and the HTTP jobs' backlog (read through the operator's queue view),
 * the storage guard. The API, the SMTP listeners, the HTTP job kinds and the tracking listener
 * feed theirs where they are built; the tracking thread's counts are brought in before each scrape.
 */
export function instrument(
  config: Config,
  core: Core,
  deps: { log: Logger; signals: Signals<DaemonSignals>; storage: StorageGuard; bound: BoundListeners },
): Metrics {
  const queue = new QueueAdmin({
    messages: core.messages,
    repo: core.messagesRepo,
    events: core.events,
    clock: core.clock,
    jobs: jobStore(core),
    daemon: null,
  });
  // A scan cut by the store reopening after a failed write serves the last figures (their age is exported).
  let last: QueueSnapshot = { destinations: [], jobs: [] };
  const metrics = new Metrics(
    {
      read: async () => {
        try {
          const status = await queue.status();
          last = { destinations: status.destinations, jobs: status.jobs };
        } catch (err) {
          const code = (err as { code?: unknown })?.code;
          if (code !== 'LEVEL_DATABASE_NOT_OPEN' && code !== 'LEVEL_ITERATOR_NOT_OPEN') throw err;
        }
        return last;
      },
      refreshMs: config.metrics.queue_refresh_seconds * 1000,
      now: () => core.clock.now(),
    },
    async () => deps.bound.tracking?.sync(),
  );
  deps.signals.on('store.committed', ({ seconds, operations, writers }) => {
    metrics.storeCommitDuration.observe(seconds);
    metrics.storeBatchOps.observe(operations);
    metrics.storeBatchWriters.observe(writers);
  });
  core.eventsRepo.onLanded((event) => metrics.countEvent(event));
  deps.signals.on('dkim.signed', (algorithm) => metrics.dkimSignatures.inc({ algorithm }));
  storageMetrics(metrics.registry, deps.storage, resolve(config.keys.dir));
  deps.log.debug('metrics instruments attached');
  return metrics;
}

/** The metrics listener (metrics.enabled): /metrics, /healthz and /readyz. */
export class MetricsAssembly implements Assembly {
  readonly name = 'metrics';
  readonly sections = ['metrics'];
  private listener: MetricsListener | null = null;

  constructor(
    private readonly ctx: Context,
    /** What /readyz reports: every assembly's lines. */
    private readonly readiness: () => Readiness[],
  ) {}

  async start(): Promise<void> {
    const { config, metrics, log, bound } = this.ctx;
    if (!config.metrics.enabled) return;
    this.listener = await MetricsListener.start(config.metrics.host, config.metrics.port, metrics, this.readiness, log, bound.metrics ?? undefined);
    log.info({ url: this.listener.url }, 'metrics listening');
  }

  /** The listener's base URL. */
  get url(): string {
    if (!this.listener) throw new Error('the metrics listener is off (metrics.enabled: false)');
    return this.listener.url;
  }

  held(): HeldListener[] {
    return this.listener ? [heldAt('metrics', this.listener.url)] : [];
  }

  async stopListening(): Promise<void> {
    await this.listener?.close();
  }
}
