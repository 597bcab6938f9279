import type { Logger } from 'pino';
import { schedule, type ScheduledTask } from 'node-cron';
import type { Config } from '../config/schema.ts';
import type { StorageGuard } from '../store/storage-guard.ts';
import { purgePublished } from '../cluster/published-retention.ts';
import type { Core } from './core.ts';
import type { Assembly, Readiness } from './lifecycle.ts';

/**
 * The store and the domain services (built by core.ts, before every other assembly), the storage
 * guard over the data directory, and the scheduled maintenance: idempotency purge, DNS re-checks,
 * DKIM rotation, retention. In a cluster, what touches shared records (the first three, and the
 * purge of expired suppressions) is done by the leader only; each node purges its own messages,
 * events and jobs. First in the daemon's list: it starts first and closes the store last.
 */
export class CoreAssembly implements Assembly {
  readonly name = 'core';
  readonly sections = [
    'server',
    'data',
    'keys',
    'log',
    'dns',
    'domains',
    'dkim',
    'messages',
    'events',
    'statistics',
    'billing',
    'storage',
    'shutdown',
    'cluster',
  ];
  private readonly jobs: ScheduledTask[] = [];
  private stopping = false;

  constructor(
    private readonly core: Core,
    private readonly storage: StorageGuard,
    private readonly log: Logger,
    /** Whether this node does the work done once per cluster (the leader; a single node always). */
    private readonly isLeader: () => boolean = () => true,
  ) {}

  async start(): Promise<void> {
    const { core, log } = this;
    const { config } = core;
    log.info({ data_dir: core.store.dir }, 'store opened');
    await this.storage.start();
    for (const step of core.migrations) log.info({ step }, 'store migrated');
    const byLeader = (task: () => Promise<void>) => async () => {
      if (this.isLeader()) await task();
    };
    this.jobs.push(
      schedule(
        config.api.idempotency.purge_schedule,
        byLeader(async () => {
          const purged = await core.idempotency.purgeExpired(core.clock.now());
          if (purged > 0) log.info({ purged }, 'expired idempotency records purged');
        }),
        { name: 'idempotency-purge', noOverlap: true },
      ),
      schedule(
        config.domains.check_schedule,
        byLeader(async () => {
          const changed = await core.dnsChecker.checkAll((domain, err) => log.warn({ err, domain: domain.name }, 'DNS check failed'));
          log.info({ changed }, 'domain DNS re-check done');
        }),
        { name: 'domain-dns-check', noOverlap: true },
      ),
      schedule(
        config.dkim.rotation_schedule,
        byLeader(async () => {
          const result = await core.rotator.runDaily((domain, err) => log.warn({ err, domain: domain.name }, 'DKIM rotation failed'));
          log.info(result, 'DKIM rotation job done');
        }),
        { name: 'dkim-rotation', noOverlap: true },
      ),
      schedule(
        config.messages.retention_purge_schedule,
        async () => {
          const purged = await core.messages.purge();
          // Suppressions are shared records (the leader's to purge); the rest is this node's own.
          const suppressions = this.isLeader() ? await core.suppressions.purgeExpired() : undefined;
          const cutoff = core.clock.now() - config.events.retention_days * 86_400_000;
          const events = await core.eventsRepo.purgeBefore(cutoff);
          const failedJobs = await core.jobs.purgeFailedBefore(cutoff);
          const inbound = await core.inboundRepo.purgeBefore(cutoff);
          // Cluster mode: what the nodes published goes by the same rules, once (the leader's).
          const published = core.cluster && this.isLeader() ? await purgePublished(core.cluster.published, core.clock.now(), cutoff) : undefined;
          log.info(
            { ...purged, suppressions, events, failed_jobs: failedJobs, inbound, published },
            'message retention, expired suppressions and old events purge done',
          );
        },
        { name: 'message-retention', noOverlap: true },
      ),
    );
  }

  ready(): Readiness[] {
    return [
      { name: 'store', ok: this.core.store.isOpen && !this.stopping },
      { name: this.storage.ok ? 'storage' : `storage (${this.storage.reason})`, ok: this.storage.ok },
    ];
  }

  reload(config: Config): () => string[] {
    return () => {
      this.log.level = config.log.level;
      return [];
    };
  }

  async stopListening(): Promise<void> {
    this.stopping = true;
  }

  async close(): Promise<void> {
    this.storage.stop();
    for (const job of this.jobs)
      await Promise.resolve(job.stop()).catch((err: unknown) => this.log.warn({ err }, 'could not stop a scheduled job; stopping all the same'));
    await this.core.store.close();
  }
}
