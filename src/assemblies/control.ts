import { backupStream } from '../backup/producer.ts';
import type { QueueDrain } from '../cluster/drain.ts';
import { DaemonDoctorReads } from '../control/doctor-reads.ts';
import type { HeldListener } from '../control/doctor-protocol.ts';
import { CoreAdmin } from '../control/core-admin.ts';
import { QueueAdmin } from '../control/queue-admin.ts';
import type { ControlHandlers, UiSignIn } from '../control/server.ts';
import { Router, routerOptions } from '../delivery/router.ts';
import type { JobEngine } from '../queue/engine.ts';
import { deliveryRouting } from '../queue/destination-name.ts';
import { jobStore } from './core.ts';
import type { JobsAssembly } from './jobs.ts';
import type { Assembly, Context, Readiness } from './lifecycle.ts';
import type { MailAssembly } from './mail.ts';

/**
 * The control socket (bound since the bind phase, in the data directory): the CLI's queue,
 * admin, doctor and backup commands talk to it while the daemon holds the store.
 */
export class ControlAssembly implements Assembly {
  readonly name = 'control';
  /** Its socket's path follows data.dir, which the core owns. */
  readonly sections = [];
  private serving = false;
  /** What the socket serves, once started (the dashboard's operator page calls the same). */
  handlers: ControlHandlers | null = null;

  constructor(
    private readonly ctx: Context,
    private readonly jobs: JobsAssembly,
    private readonly mail: MailAssembly,
    /** The sockets every assembly holds now, for `postilion doctor`. */
    private readonly listeners: () => HeldListener[],
    /** `postilion queue drain` (cluster mode; null: a node on its own). */
    private readonly queueDrain: QueueDrain | null = null,
    /**
     * `postilion ui login|logout --all` (dashboard/login-links.ts uiSignIn), asked for at start:
     * the dashboard's sessions may belong to an assembly built after this one. Null: answered 404.
     */
    private readonly ui: (() => UiSignIn | null) | null = null,
  ) {}

  async start(): Promise<void> {
    const { config, core, log, bound } = this.ctx;
    const d = config.delivery;
    const { engine } = this.jobs;
    const delivery = this.mail.delivery;
    const queue = new QueueAdmin({
      messages: core.messages,
      repo: core.messagesRepo,
      events: core.events,
      clock: core.clock,
      log,
      jobs: jobStore(core),
      routing: deliveryRouting(d, delivery?.router ?? new Router(core.resolver, routerOptions(d), core.clock)),
      daemon: {
        delivery: delivery
          ? { scheduler: engineView(engine), limits: { concurrency: d.concurrency, perDestination: d.per_destination, readyLimit: d.ready_limit } }
          : null,
        engine,
      },
    });
    const doctor = new DaemonDoctorReads(core.domainsRepo, this.listeners);
    const drain = this.queueDrain;
    const ui = this.ui?.() ?? null;
    this.handlers = {
      queue,
      admin: new CoreAdmin(core),
      doctor,
      backup: () => backupStream(core.store, config.keys.dir, core.clock),
      ...(drain ? { drain: (to: string, waitSeconds?: number) => drain.run(to, waitSeconds) } : {}),
      ...(ui ? { ui } : {}),
    };
    bound.control.serve(this.handlers, log);
    this.serving = true;
  }

  ready(): Readiness[] {
    return [{ name: 'control', ok: this.serving }];
  }

  async stopListening(graceMs: number): Promise<void> {
    await this.ctx.bound.control.close(graceMs);
  }
}

/** The engine as the operator's view of mail sees it. */
function engineView(engine: JobEngine): { snapshot: JobEngine['snapshot']; wake: () => Promise<void>; holds: (id: string) => boolean } {
  return { snapshot: () => engine.snapshot(), wake: () => engine.wake(), holds: (id) => engine.holds('message', id) };
}
