import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { ConfigError } from '../config/load.ts';
import type { DestinationGate } from '../cluster/destination-gate.ts';
import type { Config } from '../config/schema.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { JobEngine } from '../queue/engine.ts';
import { AttemptLog } from '../queue/attempt-log.ts';
import { downOrigins, type HttpJobsDeps } from '../queue/http-jobs.ts';
import { OutcomeWriter } from '../queue/outcome-writer.ts';
import { LaneShaping } from '../queue/shaping/lane-shaping.ts';
import { parseShapingFile, shapingRules, ShapingRulesError } from '../queue/shaping/rules.ts';
import type { Clock } from '../util/time.ts';
import type { StorageGuard } from '../store/storage-guard.ts';
import type { Signals } from '../util/signals.ts';
import type { Core, Data } from './core.ts';
import type { Assembly, DaemonSignals } from './lifecycle.ts';

/** What both HTTP job kinds (webhook deliveries, route POSTs) take from the engine's side. */
export type HttpJobsShared = Omit<HttpJobsDeps, 'targets' | 'post' | 'handOff' | 'withdraw'>;

/**
 * The one job engine and what its kinds share: outcomes the store refused, written again until
 * it takes them (given up at a stop), and which HTTP origins are down. It is built before the
 * services (a message the engine holds can no longer be cancelled); mail, webhooks and inbound
 * register their kinds with it as they are built. It starts once they have started (its place
 * in the daemon's list), and at a stop lets attempts in flight finish before their connections
 * close (`drain`), then waits a last second for the attempts cut by that close (`close`).
 */
export class JobsAssembly implements Assembly {
  readonly name = 'jobs';
  /** Its limits are those of delivery and webhooks, which own them. */
  readonly sections = [];
  readonly writer = new OutcomeWriter();
  private readonly down = downOrigins();
  /** The last requests of each webhook and route (the dashboard's recent deliveries). */
  readonly attempts = new AttemptLog();

  private constructor(
    readonly engine: JobEngine,
    /** Traffic shaping of mail's lanes (delivery.shaping); null when off. */
    readonly shaping: LaneShaping | null,
    private readonly data: Data,
    private readonly storage: StorageGuard,
    private readonly log: Logger,
  ) {}

  /** `gate`: in a cluster, the destination rates and slots shared with the other nodes (SharedLimits.destinations). */
  static async build(data: Data, log: Logger, signals: Signals<DaemonSignals>, storage: StorageGuard, gate?: DestinationGate): Promise<JobsAssembly> {
    const { config } = data;
    const d = config.delivery;
    const w = config.webhooks;
    const shaping = d.enabled && d.shaping ? readShaping(d, data.clock) : null;
    const engine = new JobEngine(
      data.jobIndex,
      {
        dispatchers: {
          smtp: { concurrency: d.concurrency, perDestination: d.per_destination, readyLimit: d.ready_limit },
          // One origin may hold a quarter of the memory: a slow endpoint never fills it for the others.
          http: {
            concurrency: w.concurrency,
            perDestination: w.per_origin,
            readyLimit: w.ready_limit,
            perDestinationReady: Math.max(10, Math.floor(w.ready_limit / 4)),
          },
        },
        destinations: d.destinations,
        suspended: (await data.meta.suspended()).keys(),
        gate,
        shaping: shaping ?? undefined,
      },
      data.clock,
      log,
    );
    signals.on('storage.writable', (ok) => engine.storageWritable(ok));
    return new JobsAssembly(engine, shaping, data, storage, log);
  }

  /** What the webhook and route kinds share (the engine, the outcome writer, the origins that are down). */
  httpShared(core: Core, log: Logger, metrics: Metrics): HttpJobsShared {
    const { engine } = this;
    return {
      store: core.store,
      jobs: core.jobs,
      clock: core.clock,
      log,
      notify: (dueMs) => engine.notify(dueMs),
      pause: (destination, untilMs) => engine.pause(destination, untilMs),
      unpause: (destination) => engine.unpause(destination),
      down: this.down,
      observe: (kind, outcome) => metrics.httpDeliveries.inc({ kind, outcome }),
      writer: this.writer,
      attempts: this.attempts,
    };
  }

  async start(): Promise<void> {
    await this.data.jobIndex.fence();
    this.engine.storageWritable(this.storage.ok);
    this.engine.start();
    const { config } = this.data;
    this.log.info(
      { delivery: config.delivery.enabled, concurrency: config.delivery.concurrency, webhook_concurrency: config.webhooks.concurrency },
      'job engine started',
    );
  }

  async drain(graceMs: number): Promise<void> {
    // Outcomes the store refuses are not waited for: it would not take them within the grace period.
    if (!this.storage.ok) this.writer.giveUp();
    // Attempts in flight finish (within the grace period); queued work stays in the store.
    await this.engine.stop(graceMs);
    // Outcomes the store refused are written no more: their jobs may run again after the restart.
    this.writer.giveUp();
  }

  async close(): Promise<void> {
    // The attempts cut by closing the connections (the kinds' drains) record their outcome before the store closes.
    await this.engine.stop(1000);
  }
}

/** Origins with limits of their own (delivery.destinations): the HTTP clients keep that many connections to them. */
export function originSockets(config: Config): Record<string, number> {
  return Object.fromEntries(
    Object.entries(config.delivery.destinations).flatMap(([destination, limits]) =>
      destination.includes('://') && limits.concurrency !== undefined ? [[destination, limits.concurrency]] : [],
    ),
  );
}

/** The bundled shaping rules (config/shaping.yaml) with delivery.shaping_file over them; a file that cannot be read or parsed stops the start. */
export function readShaping(d: Config['delivery'], clock: Clock): LaneShaping {
  const bundled = fileURLToPath(new URL('../../config/shaping.yaml', import.meta.url));
  const read = (file: string) => {
    try {
      return parseShapingFile(readFileSync(file, 'utf8'), file);
    } catch (err) {
      if (err instanceof ShapingRulesError) throw new ConfigError(`delivery.shaping_file: ${err.message}`);
      throw new ConfigError(`delivery.shaping_file: cannot read ${file}: ${(err as Error).message}`);
    }
  };
  const operator = d.shaping_file ? resolve(d.shaping_file) : null;
  try {
    return new LaneShaping(shapingRules(read(bundled), operator ? read(operator) : {}, operator ?? bundled), d.per_destination, clock);
  } catch (err) {
    if (err instanceof ShapingRulesError) throw new ConfigError(`delivery.shaping_file: ${err.message}`);
    throw err;
  }
}
