import type { SignedPost } from '../delivery/http.ts';
import { HttpClientThread } from '../delivery/http-client-thread.ts';
import { HttpJobs } from '../queue/http-jobs.ts';
import { webhookTargets } from '../webhooks/deliveries.ts';
import { WebhookFanout } from '../webhooks/fanout.ts';
import { RecentEvents } from '../webhooks/recent-events.ts';
import { originSockets, type JobsAssembly } from './jobs.ts';
import type { Assembly, Context } from './lifecycle.ts';

/**
 * Webhook deliveries handed to the HTTP thread at once per origin, as a multiple of its
 * connections: while outcomes are written here, its connections already carry the next requests.
 * 32 × 4 connections is about 18 ms of requests at full speed on a loopback receiver, more than
 * an outcome takes to come back (the thread hands them back 4 ms after the first) and be written.
 */
const WEBHOOK_HAND_OFF = 32;

/**
 * Webhooks: the fan-out of stored events into delivery jobs, and the webhook job kind, whose
 * POSTs are made by a thread of their own (many and small: the store, the engine and the fan-out
 * keep this event loop).
 */
export class WebhooksAssembly implements Assembly {
  readonly name = 'webhooks';
  readonly sections = ['webhooks'];
  private readonly http: HttpClientThread;
  private readonly deliveries: HttpJobs;
  /** The fan-out of stored events (tests wait for it to catch up). */
  readonly fanout: WebhookFanout;

  constructor(
    private readonly ctx: Context,
    jobs: JobsAssembly,
  ) {
    const { config, core, log, signals, metrics } = ctx;
    const { engine } = jobs;
    const http = new HttpClientThread(
      {
        dns: { servers: config.dns.servers, timeoutMs: config.dns.timeout_ms, tries: config.dns.tries },
        allowNetworks: config.webhooks.allow_networks,
        maxSocketsPerOrigin: config.webhooks.per_origin,
        originSockets: originSockets(config),
      },
      (err, message) => log.error({ err }, message),
    );
    const recentEvents = new RecentEvents();
    const deliveries = new HttpJobs({
      ...jobs.httpShared(core, log, metrics),
      post: (post: SignedPost) => http.postSigned(post),
      // The thread holds the next deliveries of an origin, and sends each as a connection frees.
      handOff: WEBHOOK_HAND_OFF,
      withdraw: (origin: string) => http.withdraw(origin),
      targets: webhookTargets({
        events: core.eventsRepo,
        webhooks: core.webhooksRepo,
        counters: core.webhookCounters,
        secretOf: (webhook) => core.webhooks.secretOf(webhook),
        disable: (id) => core.webhooks.disable(id),
        recent: recentEvents,
      }),
    });
    engine.register(deliveries);
    signals.on('webhook.enabled', (webhook) => {
      void deliveries.release(webhook.id).catch((err: unknown) => log.error({ err, webhook_id: webhook.id }, 'could not resume held webhook deliveries'));
    });
    signals.on('webhook.stopped', (webhook) => deliveries.stopped(webhook.url));
    this.fanout = new WebhookFanout(
      core.store,
      core.eventsRepo,
      core.meta,
      core.webhooks,
      core.jobs,
      core.clock,
      log,
      (dueMs) => engine.notify(dueMs),
      recentEvents,
    );
    this.http = http;
    this.deliveries = deliveries;
  }

  async start(): Promise<void> {
    const probes = await this.deliveries.probeParked();
    if (probes > 0) this.ctx.log.info({ destinations: probes }, 'webhook origins that were down are probed again');
    await this.fanout.start();
  }

  async drain(): Promise<void> {
    // After the engine's drain (later in the daemon's list): the deliveries in flight have ended.
    await this.fanout.stop();
    await this.http.close();
  }
}
