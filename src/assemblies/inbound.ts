import type { LateBounce } from './commands.ts';
import { resolve } from 'node:path';
import { HttpClient, type SignedPost } from '../delivery/http.ts';
import { authenticationResults, checkArrival } from '../inbound/authentication.ts';
import { Intake } from '../inbound/intake.ts';
import { InboundPolicy } from '../inbound/policy.ts';
import { readBounce, readComplaint, Reports } from '../inbound/reports.ts';
import { routeTargets } from '../inbound/route-jobs.ts';
import { spamdScore } from '../inbound/spamd.ts';
import { HttpJobs } from '../queue/http-jobs.ts';
import { loadOrCreateCertificate, readCertificate } from '../smtp/certificate.ts';
import { InboundListener } from '../smtp/inbound.ts';
import { DataSpool } from '../message/spool.ts';
import { parseCidr } from '../util/cidr.ts';
import type { HeldListener } from '../control/doctor-protocol.ts';
import type { Config } from '../config/schema.ts';
import { originSockets, type JobsAssembly } from './jobs.ts';
import type { Assembly, Context, Readiness } from './lifecycle.ts';
import type { MailAssembly } from './mail.ts';

/**
 * The inbound side: the route POST job kind (few and up to tens of MB each, requested from this
 * event loop: a copy to a thread would cost their size again) and, when smtp.inbound is on, the
 * MX: recipients decided by the InboundPolicy, messages stored by the Intake (route jobs for the
 * engine), bounces and complaints taken in by Reports.
 */
export class InboundAssembly implements Assembly {
  readonly name = 'inbound';
  readonly sections = ['smtp.inbound'];
  private readonly http: HttpClient;
  private readonly intake: Intake;
  private listener: InboundListener | null = null;

  constructor(
    private readonly ctx: Context,
    jobs: JobsAssembly,
    mail: MailAssembly,
    /** Cluster mode: hands a bounce for a message another node holds to that node (null: one node). */
    bounceElsewhere: ((node: string, bounce: LateBounce) => Promise<void>) | null = null,
  ) {
    const { config, core, log, signals, metrics } = ctx;
    const { engine } = jobs;
    const allowNetworks = config.webhooks.allow_networks.map(parseCidr);
    const http = new HttpClient({
      resolver: core.resolver,
      allowNetworks: () => allowNetworks,
      maxSocketsPerOrigin: config.webhooks.per_origin,
      originSockets: originSockets(config),
    });
    const spamd = config.smtp.inbound.spamd ? hostPort(config.smtp.inbound.spamd) : null;
    const posts = new HttpJobs({
      ...jobs.httpShared(core, log, metrics),
      post: (post: SignedPost) => http.postSigned(post),
      targets: routeTargets({
        route: (id) => core.routes.target(id),
        secretOf: (route) => core.routes.secretOf(route),
        disable: (id) => core.routes.disable(id),
        counters: core.routeCounters,
        repo: core.inboundRepo,
        authenticate: (raw, arrival) => authenticationResults(raw, arrival, config.server.hostname, core.resolver),
        spamScore: spamd ? (raw) => spamdScore(spamd, raw) : async () => 0,
      }),
    });
    engine.register(posts);
    signals.on('route.enabled', (route) => {
      void posts.release(route.id).catch((err: unknown) => log.error({ err, route_id: route.id }, 'could not resume held route POSTs'));
    });
    const reports = new Reports({
      readBounce: (raw) => readBounce(raw, mail.bounceRules),
      readComplaint: (raw) => readComplaint(raw),
      verp: core.verp,
      // In a cluster a bounce may reach any node's MX: a message another node holds is read from
      // its published copy, and its bounce goes to that node, which applies it (now, or when it is back).
      message: async (id) => (await core.messages.current(id)) ?? (bounceElsewhere ? await core.trackedMessages.get(id) : undefined),
      messagesByHeader: (accountId, header) => core.messagesRepo.findByMessageId(accountId, header),
      lateBounce: async (id, classification, text) => {
        const published = bounceElsewhere && !(await core.messages.current(id)) ? await core.trackedMessages.get(id) : undefined;
        if (!published?.node || !bounceElsewhere) return mail.outcomes.lateBounce(id, classification, text);
        await bounceElsewhere(published.node, { id, classification, text: text.slice(0, 2000) });
        return null;
      },
      complaint: (accountId, email, domain, reason) => core.suppressions.complaint(accountId, email, domain, reason),
      log,
    });
    this.intake = new Intake({
      store: core.store,
      repo: core.inboundRepo,
      jobs: core.jobs,
      events: core.events,
      groupsByMessageId: async (routeId) => (await core.routes.target(routeId))?.groupByMessageId ?? false,
      reports,
      clock: core.clock,
      log,
      notify: (dueMs) => engine.notify(dueMs),
    });
    this.http = http;
  }

  async start(): Promise<void> {
    const { config, core, log, bound, metrics, storage } = this.ctx;
    if (!config.smtp.inbound.enabled) return;
    const i = config.smtp.inbound;
    const s = config.smtp.submission;
    const spamd = i.spamd ? hostPort(i.spamd) : null;
    const certPath = resolve(config.keys.dir, s.cert);
    const tls = await loadOrCreateCertificate(certPath, resolve(config.keys.dir, s.key), config.server.hostname);
    if (tls.created) log.info({ cert: certPath, hostname: config.server.hostname }, 'self-signed SMTP certificate created');
    const resumed = await this.intake.resume();
    if (resumed > 0) log.info({ messages: resumed }, 'inbound bounces and complaints left by a stop taken in');
    this.listener = await InboundListener.start(
      {
        host: i.host,
        port: i.port,
        bound: bound.smtpInbound ?? undefined,
        hostname: config.server.hostname,
        tls,
        maxMessageBytes: i.max_message_bytes,
        maxRecipients: i.max_recipients,
        maxConnectionsPerAddress: i.max_connections_per_address,
        graceMs: config.shutdown.grace_seconds * 1000,
        deadlines: { commandMs: config.smtp.command_deadline_seconds * 1000, dataMs: config.smtp.data_deadline_seconds * 1000 },
        dmarcPolicy: i.dmarc_policy,
      },
      {
        policy: new InboundPolicy({
          domainByName: (name) => core.domainsRepo.getByName(name),
          routesAt: (accountId, domain) => core.routes.routesAt(accountId, domain),
          verp: core.verp,
        }),
        intake: this.intake,
        repo: core.inboundRepo,
        newSpool: () => new DataSpool(core.store, core.messagesRepo),
        checkArrival: (parts, arrival) =>
          checkArrival(parts, arrival, {
            hostname: config.server.hostname,
            resolver: core.resolver,
            ...(spamd ? { spamScore: (raw: readonly Buffer[]) => spamdScore(spamd, raw) } : {}),
          }),
        log,
        observer: metrics.inbound,
        storage,
      },
    );
  }

  /** The inbound MX listener's bound port (null when it is off). */
  get port(): number | null {
    return this.listener?.port ?? null;
  }

  ready(): Readiness[] {
    return this.ctx.config.smtp.inbound.enabled ? [{ name: 'smtp-inbound', ok: this.listener !== null }] : [];
  }

  held(): HeldListener[] {
    return this.listener ? [{ name: 'inbound', host: this.ctx.config.smtp.inbound.host, port: this.listener.port }] : [];
  }

  /** Its certificate is submission's (smtp.submission.cert and key), re-read at every reload while it runs. */
  reload(config: Config): () => string[] {
    const s = config.smtp.submission;
    const tls = this.listener ? readCertificate(resolve(config.keys.dir, s.cert), resolve(config.keys.dir, s.key)) : null;
    return () => {
      if (tls) this.listener?.reloadTls(tls);
      return [];
    };
  }

  async stopListening(): Promise<void> {
    await this.listener?.close();
  }

  async drain(): Promise<void> {
    // After the engine's drain (later in the daemon's list): the POSTs in flight have ended.
    this.http.close();
  }
}

/** `host:port` or `[v6]:port`. */
function hostPort(text: string): { host: string; port: number } {
  const colon = text.lastIndexOf(':');
  return { host: text.slice(0, colon).replace(/^\[|\]$/g, ''), port: Number(text.slice(colon + 1)) };
}
