import type { Logger } from 'pino';
import { ApiAssembly } from './assemblies/api.ts';
import { ClusterAssembly } from './assemblies/cluster.ts';
import { buildCore, openData, storageSettings, type Core } from './assemblies/core.ts';
import { CommandsAssembly } from './assemblies/commands.ts';
import { CoreAssembly } from './assemblies/core-assembly.ts';
import { ControlAssembly } from './assemblies/control.ts';
import { InboundAssembly } from './assemblies/inbound.ts';
import { JobsAssembly } from './assemblies/jobs.ts';
import { reloadAll, startAll, stopAll, type Assembly, type Context, type DaemonSignals, type Readiness } from './assemblies/lifecycle.ts';
import { MailAssembly } from './assemblies/mail.ts';
import { instrument, MetricsAssembly } from './assemblies/metrics.ts';
import { SubmissionAssembly } from './assemblies/submission.ts';
import { TrackingAssembly } from './assemblies/tracking.ts';
import { WebhooksAssembly } from './assemblies/webhooks.ts';
import { bindListeners, type BoundListeners } from './bind-phase.ts';
import { SharedLimits } from './cluster/shared-limits.ts';
import { applyLive, reloadPlan } from './config/reload.ts';
import type { Config } from './config/schema.ts';
import type { Metrics } from './metrics/metrics.ts';
import { assertRoomToStart, StorageGuard } from './store/storage-guard.ts';
import { boundHeapGrowth } from './util/heap.ts';
import { Signals } from './util/signals.ts';
import type { Clock } from './util/time.ts';

export interface DaemonOptions {
  config: Config;
  log: Logger;
  /** Where a one-time secret is shown to the operator (stdout), never the log. */
  announce: (text: string) => void;
  clock?: Clock;
  /** The listeners bound by the caller (`postilion start` binds before its first log line); else bound first here. */
  bound?: BoundListeners;
  /** In a cluster, the limits shared with the other nodes; the caller starts it before and closes it after the daemon. */
  limits?: SharedLimits;
}

/** The assemblies by name, as the daemon built them. */
export interface Parts {
  core: CoreAssembly;
  cluster: ClusterAssembly;
  commands: CommandsAssembly;
  jobs: JobsAssembly;
  mail: MailAssembly;
  webhooks: WebhooksAssembly;
  inbound: InboundAssembly;
  tracking: TrackingAssembly;
  control: ControlAssembly;
  submission: SubmissionAssembly;
  metrics: MetricsAssembly;
  api: ApiAssembly;
}

/**
 * The composition root: binds every listener first (bind-phase.ts), opens the store, builds the
 * assemblies (src/assemblies/) with their collaborators, then starts, reloads and stops them in
 * the order of one list. No business logic lives here.
 */
export class Daemon {
  private stopping: Promise<void> | null = null;
  /** In order: start runs down the list, drain and close run up it (assemblies/lifecycle.ts). */
  readonly assemblies: readonly Assembly[];

  private constructor(
    private config: Config,
    readonly core: Core,
    private readonly log: Logger,
    /** Free space and failed writes of the data directory: while it is closed, writes are refused. */
    readonly storage: StorageGuard,
    /** The daemon's Prometheus instruments (served by the metrics listener when it is on). */
    readonly metrics: Metrics,
    private readonly bound: BoundListeners,
    /** The assemblies by name: their listeners' addresses, the engine, the fan-out. */
    readonly parts: Parts,
  ) {
    const p = parts;
    // The jobs' engine starts once its kinds have (mail, webhooks, inbound) and drains before their connections close.
    // Other nodes' commands are answered once this node is registered in the cluster, until the store closes.
    this.assemblies = [p.core, p.cluster, p.commands, p.mail, p.webhooks, p.inbound, p.jobs, p.tracking, p.control, p.submission, p.metrics, p.api];
  }

  static async start(options: DaemonOptions): Promise<Daemon> {
    const { config } = options;
    // Before anything opens or is made: a busy address stops the start with nothing to undo.
    const bound = options.bound ?? (await bindListeners(config));
    let daemon: Daemon;
    try {
      boundHeapGrowth();
      assertRoomToStart(config.data.dir, storageSettings(config));
      const signals = new Signals<DaemonSignals>();
      const data = await openData(config, options.clock, signals);
      try {
        daemon = await Daemon.build(options, data, bound, signals);
      } catch (err) {
        await data.store.close();
        throw err;
      }
    } catch (err) {
      await bound.close();
      throw err;
    }
    try {
      await startAll(daemon.assemblies);
    } catch (err) {
      await daemon.stop();
      throw err;
    }
    return daemon;
  }

  private static async build(
    options: DaemonOptions,
    data: Awaited<ReturnType<typeof openData>>,
    bound: BoundListeners,
    signals: Signals<DaemonSignals>,
  ): Promise<Daemon> {
    const { config, log } = options;
    const storage = new StorageGuard(data.store.dir, storageSettings(config), {
      log,
      recover: () => data.store.recover(),
      onChange: (ok) => signals.emit('storage.writable', ok),
    });
    signals.on('store.write-failed', (err) => storage.writeFailed(err));
    // In a cluster the limits are shared (Redis), or each node keeps its share (limit ÷ live nodes).
    let liveNodes = () => 1;
    const limits =
      options.limits ??
      (data.cluster ? new SharedLimits({ redisUrl: config.cluster.redis_url, liveNodes: () => liveNodes(), clock: data.clock, log }) : undefined);
    const jobs = await JobsAssembly.build(data, log, signals, storage, limits?.destinations);
    const core = buildCore(data, { signals, delivering: (id) => jobs.engine.holds('message', id), log });
    const metrics = instrument(config, core, { log, signals, storage, bound });
    const ctx: Context = { config, core, log, signals, metrics, storage, bound, limits };
    const mail = new MailAssembly(ctx, jobs);
    const cluster = new ClusterAssembly(ctx, jobs, options.limits ? null : (limits ?? null));
    liveNodes = () => cluster.liveNodes();
    const commands = new CommandsAssembly(ctx, jobs, (b) => mail.outcomes.lateBounce(b.id, b.classification, b.text));
    let daemon: Daemon | null = null;
    const all = () => daemon?.assemblies ?? [];
    daemon = new Daemon(config, core, log, storage, metrics, bound, {
      core: new CoreAssembly(core, storage, log, cluster.isLeader),
      cluster,
      commands,
      jobs,
      mail,
      webhooks: new WebhooksAssembly(ctx, jobs),
      inbound: new InboundAssembly(ctx, jobs, mail, commands.bounceElsewhere),
      tracking: new TrackingAssembly(ctx),
      control: new ControlAssembly(
        ctx,
        jobs,
        mail,
        () => all().flatMap((a) => a.held?.() ?? []),
        commands.queueDrain,
        () => daemon!.parts.api.uiSignIn(),
      ),
      submission: new SubmissionAssembly(ctx),
      metrics: new MetricsAssembly(ctx, () => daemon!.readiness()),
      api: new ApiAssembly(ctx, options.announce, commands.elsewhere, {
        jobs,
        control: () => daemon!.parts.control.handlers,
        readiness: () => daemon!.readiness(),
      }),
    });
    return daemon;
  }

  /** What /readyz reports: every assembly's lines. */
  readiness(): Readiness[] {
    return this.assemblies.flatMap((a) => a.ready?.() ?? []);
  }

  /**
   * Applies what can change without a restart; names every changed key that needs one (the table
   * in config/reload.ts), which keeps its running value. Everything that can fail (reading
   * certificate files) happens before anything is applied, so a failed reload changes nothing.
   */
  reload(next: Config): { applied: string[]; restartNeededFor: string[]; tlsReloaded: string[] } {
    const plan = reloadPlan(this.config, next);
    const config = applyLive(this.config, next, plan.live);
    const tlsReloaded = reloadAll(this.assemblies, config);
    this.config = config;
    this.log.info({ applied: plan.live, restart_needed_for: plan.restart, tls_reloaded: tlsReloaded }, 'configuration reloaded');
    return { applied: plan.live, restartNeededFor: plan.restart, tlsReloaded };
  }

  /** The configuration the daemon runs with (after reloads: the live keys of the last file read). */
  get runningConfig(): Config {
    return this.config;
  }

  /** Stops accepting, drains in-flight work within the grace period, closes the store. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const graceMs = this.config.shutdown.grace_seconds * 1000;
      this.log.info({ grace_seconds: this.config.shutdown.grace_seconds }, 'stopping');
      await stopAll(this.assemblies, graceMs, this.log);
      // The sockets of listeners that never started (a start that failed half-way).
      await this.bound.close().catch((err: unknown) => this.log.warn({ err, step: 'listeners' }, 'could not finish a step of the stop; stopping all the same'));
      this.log.info('stopped');
    })();
    return this.stopping;
  }
}
