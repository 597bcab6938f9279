import { TrackingHits } from './tracking/hits.ts';
import { TrackingUrlMaker } from './tracking/endpoint.ts';
import type { TrackingListenerThread } from './tracking/listener-thread.ts';
import { TrackingTokens } from './tracking/tokens.ts';
import { countersObserver, expandCount } from './stats/counters.ts';
import { rebuildCounters } from './stats/rebuild.ts';
import { Statistics } from './stats/statistics.ts';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { schedule, type ScheduledTask } from 'node-cron';
import { boundHeapGrowth } from './util/heap.ts';
import { Accounts } from './accounts/accounts.ts';
import { HeldMail } from './queue/held-mail.ts';
import { RecentEvents } from './webhooks/recent-events.ts';
import { AccountStatuses } from './accounts/account-status.ts';
import { SubAccounts } from './accounts/sub-accounts.ts';
import { CreditGate, Usage, type ReceptionCount } from './accounts/usage.ts';
import { ApiKeys } from './accounts/api-keys.ts';
import { bootstrap, bootstrapDefaults, formatBootstrap } from './accounts/bootstrap.ts';
import { buildApp, type ApiSettings } from './api/app.ts';
import { Idempotency } from './api/middleware/idempotency.ts';
import { RateLimiter, RefusalLimiter } from './api/middleware/rate-limit.ts';
import { ApiListener } from './api/server.ts';
import type { Config } from './config/schema.ts';
import type { Logger } from './logging/logger.ts';
import { AccountsRepo } from './store/accounts-repo.ts';
import { ApiKeysRepo } from './store/api-keys-repo.ts';
import { IdempotencyRepo } from './store/idempotency-repo.ts';
import { Store } from './store/store.ts';
import { DomainsRepo } from './store/domains-repo.ts';
import { EventsRepo } from './store/events-repo.ts';
import { DkimKeyStore } from './domains/dkim-keys.ts';
import { DnsChecker } from './domains/dns-checker.ts';
import { Domains } from './domains/domains.ts';
import type { Identity } from './domains/records.ts';
import { createResolver, type DnsResolver } from './domains/resolver.ts';
import { Rotator } from './domains/rotator.ts';
import { DkimSigner } from './domains/signer.ts';
import { EventRecorder } from './events/recorder.ts';
import { Acceptor } from './message/accept.ts';
import { Messages } from './message/messages.ts';
import { Sender } from './message/send.ts';
import { TemplateEngine } from './message/template-engine.ts';
import { MessagesRepo } from './store/messages-repo.ts';
import { KeyedMutex } from './util/keyed-mutex.ts';
import { parseCidr } from './util/cidr.ts';
import { SecretBox } from './util/secret-box.ts';
import { VerpTokens } from './util/verp.ts';
import { systemClock, type Clock } from './util/time.ts';
import { BounceRulesError, parseBounceRules, type BounceRule } from './bounce/rules.ts';
import { ConfigError } from './config/load.ts';
import { announcedSend, Deliverer } from './delivery/deliverer.ts';
import { Router, routerOptions } from './delivery/router.ts';
import { SmtpPool } from './delivery/smtp-pool.ts';
import { DeliveryQueue } from './queue/delivery-queue.ts';
import { Outcomes } from './queue/outcomes.ts';
import { JobEngine } from './queue/engine.ts';
import { messageKind } from './queue/message-kind.ts';
import { deliveryRouting } from './queue/destination-name.ts';
import { JobIndex } from './store/job-index.ts';
import { JobsRepo } from './store/jobs-repo.ts';
import { MetaRepo, migrate } from './store/meta.ts';
import { HttpClient, type SignedPost } from './delivery/http.ts';
import { HttpClientThread } from './delivery/http-client-thread.ts';
import { TargetCounters } from './queue/target-counters.ts';
import { webhookTargets } from './webhooks/deliveries.ts';
import { HttpJobs } from './queue/http-jobs.ts';
import { WebhookFanout } from './webhooks/fanout.ts';
import { DsnSender } from './queue/dsn-sender.ts';
import { Suppressions } from './accounts/suppressions.ts';
import { SuppressionsRepo } from './store/suppressions-repo.ts';
import { SmtpCredentials } from './accounts/smtp-credentials.ts';
import { SmtpCredentialsRepo } from './store/smtp-credentials-repo.ts';
import { Webhooks } from './webhooks/webhooks.ts';
import { WebhooksRepo } from './store/webhooks-repo.ts';
import { fileURLToPath } from 'node:url';
import { Relay } from './message/relay.ts';
import { DataSpool } from './message/spool.ts';
import { AuthThrottle } from './smtp/auth-throttle.ts';
import { loadOrCreateCertificate, readCertificate } from './smtp/certificate.ts';
import { SubmissionListeners } from './smtp/submission.ts';
import { InboundListener } from './smtp/inbound.ts';
import { InboundPolicy } from './inbound/policy.ts';
import { Intake } from './inbound/intake.ts';
import { readBounce, readComplaint, Reports } from './inbound/reports.ts';
import { routeTargets } from './inbound/route-jobs.ts';
import { authenticationResults } from './inbound/authentication.ts';
import { spamdScore } from './inbound/spamd.ts';
import { InboundRepo } from './store/inbound-repo.ts';
import { Routes } from './inbound/routes.ts';
import { RoutesRepo } from './store/routes-repo.ts';
import { CoreAdmin } from './control/core-admin.ts';
import { QueueAdmin } from './control/queue-admin.ts';
import type { ControlServer } from './control/server.ts';
import { DaemonDoctorReads } from './control/doctor-reads.ts';
import { heldAt, type HeldListener } from './control/doctor-protocol.ts';
import { backupStream } from './backup/producer.ts';
import { Metrics, type QueueSnapshot } from './metrics/metrics.ts';
import { MetricsListener } from './metrics/listener.ts';
import { applyLive, reloadPlan } from './config/reload.ts';
import { bindListeners, type BoundListeners } from './bind-phase.ts';
import { readTlsFiles } from './util/tls-files.ts';
import { storageMetrics } from './metrics/storage.ts';
import { OutcomeWriter } from './queue/outcome-writer.ts';
import { assertRoomToStart, StorageGuard, type StorageSettings } from './store/storage-guard.ts';

/**
 * Webhook deliveries handed to the HTTP thread at once per origin, as a multiple of its
 * connections: while outcomes are written here, its connections already carry the next requests.
 * 32 × 4 connections is about 18 ms of requests at full speed on a loopback receiver, more than
 * an outcome takes to come back (the thread hands them back 4 ms after the first) and be written.
 */
const WEBHOOK_HAND_OFF = 32;

/** The store and the domain services: what the daemon serves and what admin commands use. */
export interface Core {
  config: Config;
  store: Store;
  box: SecretBox;
  accounts: Accounts;
  apiKeys: ApiKeys;
  idempotency: Idempotency;
  domains: Domains;
  dnsChecker: DnsChecker;
  rotator: Rotator;
  signer: DkimSigner;
  resolver: DnsResolver;
  /** The one entrance of messages (API now, SMTP submission later). */
  acceptor: Acceptor;
  sender: Sender;
  messages: Messages;
  /** Shared with the delivery engine, which the daemon wires on top of the core. */
  messagesRepo: MessagesRepo;
  domainsRepo: DomainsRepo;
  accountsRepo: AccountsRepo;
  suppressions: Suppressions;
  /** SMTP submission credentials: the API manages them, the SMTP listener authenticates with them. */
  smtpCredentials: SmtpCredentials;
  /** Webhook resources; their secrets are sealed with keys/webhook-secrets.key. */
  webhooks: Webhooks;
  webhooksRepo: WebhooksRepo;
  webhookCounters: TargetCounters;
  events: EventRecorder;
  eventsRepo: EventsRepo;
  /** The job engine's due-time index, its HTTP job records and the meta family (cursors, suspensions). */
  jobIndex: JobIndex;
  jobs: JobsRepo;
  meta: MetaRepo;
  /** Tokens of VERP return paths (key in keys/verp.key). */
  verp: VerpTokens;
  /** Messages received by the inbound MX. */
  inboundRepo: InboundRepo;
  /** Inbound routes; their secrets are sealed with keys/route-secrets.key. */
  routes: Routes;
  routeCounters: TargetCounters;
  /** Account states (suspension with its cascade, soft delete); activations release held mail. */
  accountStatuses: AccountStatuses;
  subAccounts: SubAccounts;
  /** A parent's usage in the billing period, from the statistics counters. */
  usage: Usage;
  /** The statistics queries, over the counters the events write. */
  statistics: Statistics;
  /** Tokens of open pixels and tracked links (key in keys/tracking.key). */
  trackingTokens: TrackingTokens;
  /** Their key, for the tracking listener's thread to check tokens with. */
  trackingKey: Buffer;
  /** The tracking URLs written into tracked mail. */
  trackingUrls: TrackingUrlMaker;
  /** What the schema migration on open did (empty when the store was current). */
  migrations: string[];
  clock: Clock;
}

export function identityOf(config: Config): Identity {
  return { hostname: config.server.hostname, sendingIps: config.server.sending_ips, dmarcRecord: config.domains.dmarc_record };
}

export async function openCore(config: Config, clock: Clock = systemClock): Promise<Core> {
  const box = SecretBox.loadOrCreate(join(config.keys.dir, 'secret-box.key'));
  const store = await Store.open(resolve(config.data.dir), { expandCounts: expandCount });
  let migrations: string[];
  try {
    migrations = await migrate(store, { buildCounters: rebuildCounters });
  } catch (err) {
    await store.close();
    throw err;
  }
  const apiKeysRepo = new ApiKeysRepo(store);
  const domainsRepo = new DomainsRepo(store);
  const dkimKeys = new DkimKeyStore(join(resolve(config.keys.dir), 'dkim'));
  const domainLocks = new KeyedMutex();
  const keyLocks = new KeyedMutex();
  const resolver = createResolver({ servers: config.dns.servers, timeoutMs: config.dns.timeout_ms, tries: config.dns.tries });
  const eventsRepo = new EventsRepo(store);
  const events = new EventRecorder(eventsRepo, clock);
  if (config.statistics.counters) events.observe(countersObserver());
  const jobIndex = new JobIndex(store);
  const webhookCounters = new TargetCounters(store, 'webhookCounters');
  const webhooksRepo = new WebhooksRepo(store);
  const routeCounters = new TargetCounters(store, 'routeCounters');
  const domains = new Domains(store, domainsRepo, apiKeysRepo, dkimKeys, domainLocks, keyLocks, clock, {
    trackingSubdomain: config.domains.tracking_subdomain,
    returnPathSubdomain: config.domains.return_path_subdomain,
    subscriptionSubdomain: config.domains.subscription_subdomain,
    mediaSubdomain: config.domains.media_subdomain,
    ed25519: config.dkim.ed25519,
  });
  const messagesRepo = new MessagesRepo(store);
  const allowNetworks = config.webhooks.allow_networks.map(parseCidr);
  const accountsRepo = new AccountsRepo(store);
  const statistics = new Statistics(store);
  const receptions: ReceptionCount = async (accountId, fromMs, toMs) => {
    const buckets = await statistics.buckets({ accountId, series: 'counts', fromMs, toMs, group: 'month', senderDomains: null, recipientDomains: null, tags: null });
    return buckets.reduce((sum, b) => sum + (typeof b.counts.r === 'number' ? b.counts.r : 0), 0);
  };
  const acceptor = new Acceptor(store, messagesRepo, events, clock, new CreditGate(receptions, clock));
  const accounts = new Accounts(store, accountsRepo, clock);
  const accountStatuses = new AccountStatuses(store, accounts, accountsRepo, clock);
  const apiKeys = new ApiKeys(store, apiKeysRepo, domains.ownership, clock, keyLocks);
  const dnsChecker = new DnsChecker(store, domainsRepo, resolver, events, domainLocks, clock, identityOf(config), config.domains.check_cache_seconds * 1000);
  const trackingKey = SecretBox.loadOrCreate(join(config.keys.dir, 'tracking.key')).rawKey();
  const trackingTokens = new TrackingTokens(trackingKey);
  const trackingUrls = new TrackingUrlMaker(trackingTokens, config.tracking.link_scheme);
  return {
    config,
    store,
    box,
    accounts,
    accountStatuses,
    subAccounts: new SubAccounts(store, accounts, accountStatuses, accountsRepo, domainsRepo, messagesRepo, apiKeys),
    usage: new Usage(accountsRepo, receptions, clock, () => ({ monthlyAmount: config.billing.monthly_amount, currency: config.billing.currency })),
    apiKeys,
    idempotency: new Idempotency(new IdempotencyRepo(store), box, config.api.idempotency, clock),
    domains,
    dnsChecker,
    rotator: new Rotator(store, domainsRepo, dkimKeys, dnsChecker, domainLocks, clock, {
      ed25519: config.dkim.ed25519,
      retiredGraceDays: config.dkim.retired_grace_days,
    }),
    signer: new DkimSigner(dkimKeys, (name) => domains.signingKeys(name), clock),
    resolver,
    acceptor,
    sender: new Sender(domains, acceptor, clock, new TemplateEngine(), trackingUrls),
    messages: new Messages(store, messagesRepo, new KeyedMutex(), clock),
    messagesRepo,
    domainsRepo,
    accountsRepo,
    suppressions: new Suppressions(store, new SuppressionsRepo(store), domainsRepo, events, clock),
    smtpCredentials: new SmtpCredentials(store, new SmtpCredentialsRepo(store), domainsRepo, clock),
    webhooks: new Webhooks(store, webhooksRepo, domainsRepo, SecretBox.loadOrCreate(join(config.keys.dir, 'webhook-secrets.key')), resolver, {
      allowNetworks: () => allowNetworks,
    }, clock, webhookCounters),
    webhooksRepo,
    webhookCounters,
    events,
    eventsRepo,
    jobIndex,
    jobs: new JobsRepo(store, jobIndex),
    meta: new MetaRepo(store),
    verp: new VerpTokens(SecretBox.loadOrCreate(join(config.keys.dir, 'verp.key')).rawKey()),
    inboundRepo: new InboundRepo(store),
    routes: new Routes(store, new RoutesRepo(store), domainsRepo, SecretBox.loadOrCreate(join(config.keys.dir, 'route-secrets.key')), resolver, () => allowNetworks, routeCounters, clock),
    routeCounters,
    statistics,
    trackingTokens,
    trackingKey,
    trackingUrls,
    migrations,
    clock,
  };
}

export interface DaemonOptions {
  config: Config;
  log: Logger;
  /** Where a one-time secret is shown to the operator (stdout), never the log. */
  announce: (text: string) => void;
  clock?: Clock;
  /** The listeners bound by the caller (`postilion start` binds before its first log line); else bound first here. */
  bound?: BoundListeners;
}

/**
 * The composition root: binds every listener first (bind-phase.ts), then builds the components
 * and starts them in order (store → jobs → listeners, each taking its bound socket), and stops
 * them in reverse. No business logic lives here.
 */
export class Daemon {
  private readonly listeners: ApiListener[] = [];
  private readonly jobs: ScheduledTask[] = [];
  private engine: JobEngine | null = null;
  private pool: SmtpPool | null = null;
  private router: Router | null = null;
  private fanout: WebhookFanout | null = null;
  private http: { webhooks: HttpClientThread; routes: HttpClient } | null = null;
  private control: ControlServer | null = null;
  private submission: SubmissionListeners | null = null;
  private inbound: InboundListener | null = null;
  /** `config/bounce-rules` (or delivery.bounce_rules): replies and bounces are classified with them. */
  private bounceRules: BounceRule[] = [];
  /** The outcome rules of mail, shared by delivery and the inbound side (late bounces). */
  private outcomes!: Outcomes;
  private metricsListener: MetricsListener | null = null;
  private trackingListener: TrackingListenerThread | null = null;
  private trackingHits: TrackingHits | null = null;
  /** The daemon's Prometheus instruments (served by the metrics listener when it is on). */
  readonly metrics: Metrics;
  private settings: ApiSettings;
  private stopping: Promise<void> | null = null;
  /** Free space and failed writes of the data directory: while it is closed, writes are refused. */
  readonly storage: StorageGuard;
  private deliveryQueue: DeliveryQueue | null = null;
  /** Outcomes of webhook and route POSTs the store refused, written again until it takes them. */
  private readonly httpOutcomes = new OutcomeWriter();

  private constructor(
    private config: Config,
    private readonly core_: Core,
    private readonly log: Logger,
    private readonly rateLimiter: RateLimiter,
    private readonly refusalLimiter: RefusalLimiter,
    private readonly bound: BoundListeners,
  ) {
    this.settings = apiSettings(config);
    this.metrics = instrument(config, core_, log, async () => this.trackingListener?.sync());
    this.control = bound.control;
    this.trackingListener = bound.tracking;
    this.storage = new StorageGuard(core_.store.dir, storageSettings(config), {
      log,
      recover: () => core_.store.recover(),
      onChange: (ok) => this.engine?.storageWritable(ok),
    });
    core_.store.watchWrites((err) => this.storage.writeFailed(err));
    storageMetrics(this.metrics.registry, this.storage, resolve(config.keys.dir));
  }

  static async start(options: DaemonOptions): Promise<Daemon> {
    const { config, log } = options;
    // Before anything opens or is made: a busy address stops the start with nothing to undo.
    const bound = options.bound ?? (await bindListeners(config));
    let core: Core;
    try {
      boundHeapGrowth();
      assertRoomToStart(config.data.dir, storageSettings(config));
      core = await openCore(config, options.clock);
    } catch (err) {
      await bound.close();
      throw err;
    }
    const daemon = new Daemon(config, core, log, new RateLimiter(config.api.rate_limits, core.clock), new RefusalLimiter(config.api.auth_failures, core.clock), bound);
    try {
      await daemon.startComponents(options.announce);
    } catch (err) {
      await daemon.stop();
      throw err;
    }
    return daemon;
  }

  /** The store and domain services, for in-process administration (and tests). */
  get core(): Core {
    return this.core_;
  }

  get apiUrl(): string {
    return this.listeners[0]!.url;
  }

  get urls(): string[] {
    return this.listeners.map((l) => l.url);
  }

  private async startComponents(announce: (text: string) => void): Promise<void> {
    const { config, core_: core, log } = this;
    log.info({ data_dir: core.store.dir }, 'store opened');
    await this.storage.start();
    for (const step of core.migrations) log.info({ step }, 'store migrated');

    const app = buildApp({
      log,
      accounts: core.accounts,
      apiKeys: core.apiKeys,
      domains: core.domains,
      dnsChecker: core.dnsChecker,
      sender: core.sender,
      messages: core.messages,
      suppressions: core.suppressions,
      smtpCredentials: core.smtpCredentials,
      webhooks: core.webhooks,
      routes: core.routes,
      statistics: core.statistics,
      subAccounts: core.subAccounts,
      usage: core.usage,
      now: () => core.clock.now(),
      idempotency: core.idempotency,
      rateLimiter: this.rateLimiter,
      refusalLimiter: this.refusalLimiter,
      metrics: this.metrics,
      settings: () => this.settings,
      storage: this.storage,
    });

    this.jobs.push(
      schedule(
        config.api.idempotency.purge_schedule,
        async () => {
          const purged = await core.idempotency.purgeExpired(core.clock.now());
          if (purged > 0) log.info({ purged }, 'expired idempotency records purged');
        },
        { name: 'idempotency-purge', noOverlap: true },
      ),
      schedule(
        config.domains.check_schedule,
        async () => {
          const changed = await core.dnsChecker.checkAll((domain, err) => log.warn({ err, domain: domain.name }, 'DNS check failed'));
          log.info({ changed }, 'domain DNS re-check done');
        },
        { name: 'domain-dns-check', noOverlap: true },
      ),
      schedule(
        config.dkim.rotation_schedule,
        async () => {
          const result = await core.rotator.runDaily((domain, err) => log.warn({ err, domain: domain.name }, 'DKIM rotation failed'));
          log.info(result, 'DKIM rotation job done');
        },
        { name: 'dkim-rotation', noOverlap: true },
      ),
      schedule(
        config.messages.retention_purge_schedule,
        async () => {
          const purged = await core.messages.purge();
          const suppressions = await core.suppressions.purgeExpired();
          const cutoff = core.clock.now() - config.events.retention_days * 86_400_000;
          const events = await core.eventsRepo.purgeBefore(cutoff);
          const failedJobs = await core.jobs.purgeFailedBefore(cutoff);
          const inbound = await core.inboundRepo.purgeBefore(cutoff);
          log.info({ ...purged, suppressions, events, failed_jobs: failedJobs, inbound }, 'message retention, expired suppressions and old events purge done');
        },
        { name: 'message-retention', noOverlap: true },
      ),
    );

    if (config.tracking.enabled) {
      this.trackingHits = new TrackingHits(core.messagesRepo, (ops) => core.store.commit(ops), core.events, core.clock, config.tracking.scanner_seconds * 1000,
        (err) => log.error({ err }, 'an open or click could not be recorded'), (count) => this.trackingListener?.written(count));
      // Its thread listens since the bind phase; it answers from now on.
      const tracking = this.bound.tracking!;
      tracking.serve(
        { tokenKey: core.trackingKey, trustedProxies: config.api.trusted_proxies },
        { domains: core.domainsRepo, messages: core.messagesRepo, hits: this.trackingHits, log, observer: this.metrics.tracking },
      );
      log.info({ url: tracking.url }, 'tracking listening');
    }

    this.engine = await this.startEngine();
    this.startControl();
    if (config.smtp.submission.enabled) this.submission = await this.startSubmission();
    if (config.smtp.inbound.enabled) this.inbound = await this.startInbound();

    const handler = app.callback();
    this.listeners.push(await ApiListener.start({ host: config.api.host, port: config.api.port, bound: this.bound.api, log }, handler));
    if (config.api.tls.enabled) {
      this.listeners.push(
        await ApiListener.start({ host: config.api.tls.host, port: config.api.tls.port, bound: this.bound.apiTls ?? undefined, tls: readTls(config), log }, handler),
      );
    }
    log.info({ urls: this.urls }, 'API listening');

    if (config.metrics.enabled) {
      this.metricsListener = await MetricsListener.start(config.metrics.host, config.metrics.port, this.metrics, () => this.readiness(), log, this.bound.metrics ?? undefined);
      log.info({ url: this.metricsListener.url }, 'metrics listening');
    }

    if (!(await core.accounts.hasAny())) {
      const result = await bootstrap(core.store, core.accounts, core.apiKeys, bootstrapDefaults(config.server.hostname));
      log.info({ account_id: result.account.id, key_id: result.key.id }, 'bootstrap account and admin key created');
      announce(formatBootstrap(result, this.apiUrl));
    }
  }

  /**
   * The job engine with its kinds: outbound mail (deliverer: router, SMTP sessions, DKIM →
   * outcomes) when delivery is on, and webhook deliveries fed by the fan-out of stored events.
   */
  private async startEngine(): Promise<JobEngine> {
    const { config, core_: core, log } = this;
    const d = config.delivery;
    const rulesFile = d.bounce_rules ? resolve(d.bounce_rules) : fileURLToPath(new URL('../config/bounce-rules', import.meta.url));
    this.bounceRules = readBounceRules(rulesFile);
    const retry = {
      firstDelayMs: d.retry.first_delay_seconds * 1000,
      maxDelayMs: d.retry.max_delay_seconds * 1000,
      maxAgeMs: d.retry.max_age_hours * 3_600_000,
      jitter: d.retry.jitter,
    };
    const dsn = new DsnSender(core.domainsRepo, core.accountsRepo, core.messagesRepo, core.acceptor, config.server.hostname);
    this.outcomes = new Outcomes(core.messages, core.messagesRepo, core.events, retry, core.suppressions, dsn);
    const engine = new JobEngine(core.jobIndex, {
      dispatchers: {
        smtp: { concurrency: d.concurrency, perDestination: d.per_destination, readyLimit: d.ready_limit },
        // One origin may hold a quarter of the memory: a slow endpoint never fills it for the others.
        http: { concurrency: config.webhooks.concurrency, perDestination: config.webhooks.per_origin, readyLimit: config.webhooks.ready_limit, perDestinationReady: Math.max(10, Math.floor(config.webhooks.ready_limit / 4)) },
      },
      destinations: d.destinations,
      suspended: (await core.meta.suspended()).keys(),
    }, core.clock, log);
    if (d.enabled) this.startDelivery(engine);

    // Origins with limits of their own: the clients keep that many connections to them.
    const originSockets = Object.fromEntries(Object.entries(d.destinations).flatMap(([destination, limits]) => (destination.includes('://') && limits.concurrency !== undefined ? [[destination, limits.concurrency]] : [])));
    // Webhook deliveries, many and small, are requested from a thread of their own: the store,
    // the engine and the fan-out keep this event loop. Route POSTs, few and up to tens of MB
    // each (a copy to a thread would cost their size again), are requested from here.
    const webhookHttp = new HttpClientThread(
      { dns: { servers: config.dns.servers, timeoutMs: config.dns.timeout_ms, tries: config.dns.tries }, allowNetworks: config.webhooks.allow_networks, maxSocketsPerOrigin: config.webhooks.per_origin, originSockets },
      (err, message) => log.error({ err }, message),
    );
    const allowNetworks = config.webhooks.allow_networks.map(parseCidr);
    const routeHttp = new HttpClient({ resolver: core.resolver, allowNetworks: () => allowNetworks, maxSocketsPerOrigin: config.webhooks.per_origin, originSockets });
    this.http = { webhooks: webhookHttp, routes: routeHttp };
    // What both HTTP kinds share: the engine, and which origins are down.
    const shared = {
      store: core.store,
      jobs: core.jobs,
      clock: core.clock,
      log,
      notify: (dueMs: number) => engine.notify(dueMs),
      pause: (destination: string, untilMs: number) => engine.pause(destination, untilMs),
      unpause: (destination: string) => engine.unpause(destination),
      down: new Map<string, { probes: number; until: number }>(),
      observe: (kind: 'webhook' | 'route', outcome: string) => this.metrics.httpDeliveries.inc({ kind, outcome }),
      writer: this.httpOutcomes,
    };
    const recentEvents = new RecentEvents();
    const deliveries = new HttpJobs({
      ...shared,
      post: (post: SignedPost) => webhookHttp.postSigned(post),
      // The thread holds the next deliveries of an origin, and sends each as a connection frees.
      handOff: WEBHOOK_HAND_OFF,
      withdraw: (origin: string) => webhookHttp.withdraw(origin),
      targets: webhookTargets({
        store: core.store,
        webhooks: core.webhooksRepo,
        counters: core.webhookCounters,
        secretOf: (webhook) => core.webhooks.secretOf(webhook),
        disable: (id) => core.webhooks.disable(id),
        recent: recentEvents,
      }),
    });
    engine.register(deliveries);
    core.webhooks.onEnabled = (webhook) => {
      void deliveries.release(webhook.id).catch((err: unknown) => log.error({ err, webhook_id: webhook.id }, 'could not resume held webhook deliveries'));
    };
    core.webhooks.onStopped = (webhook) => deliveries.stopped(webhook.url);
    const spamd = config.smtp.inbound.spamd ? hostPort(config.smtp.inbound.spamd) : null;
    const routePosts = new HttpJobs({
      ...shared,
      post: (post: SignedPost) => routeHttp.postSigned(post),
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
    engine.register(routePosts);
    core.routes.onEnabled = (route) => {
      void routePosts.release(route.id).catch((err: unknown) => log.error({ err, route_id: route.id }, 'could not resume held route POSTs'));
    };
    const probes = await deliveries.probeParked();
    if (probes > 0) log.info({ destinations: probes }, 'webhook origins that were down are probed again');
    this.fanout = new WebhookFanout(core.store, core.meta, core.webhooks, core.jobs, core.clock, log, (dueMs) => engine.notify(dueMs), recentEvents);
    await this.fanout.start();
    await core.jobIndex.fence();
    engine.storageWritable(this.storage.ok);
    engine.start();
    log.info({ delivery: d.enabled, concurrency: d.concurrency, webhook_concurrency: config.webhooks.concurrency }, 'job engine started');
    return engine;
  }

  /** Outbound mail on the engine: router, SMTP pool, deliverer, outcomes. */
  private startDelivery(engine: JobEngine): void {
    const { config, core_: core, log } = this;
    const d = config.delivery;
    const rules = this.bounceRules;
    const router = new Router(core.resolver, routerOptions(d), core.clock);
    this.router = router;
    const pool = new SmtpPool({
      hostname: config.server.hostname,
      messagesPerConnection: d.messages_per_connection,
      idleTimeoutMs: d.idle_timeout_ms,
      connectTimeoutMs: d.connect_timeout_ms,
      commandTimeoutMs: d.command_timeout_ms,
      tlsRejectUnauthorized: d.tls_reject_unauthorized,
    });
    const deliverer = new Deliverer(core.messagesRepo, core.domainsRepo, core.signer, router, pool, rules, core.clock, (id) => core.verp.token(id));
    const held = new HeldMail((id) => core.accountsRepo.getAccount(id), core.messages, core.messagesRepo, log, (dueMs) => engine.notify(dueMs));
    const queue = new DeliveryQueue(deliverer, this.outcomes, core.suppressions, { get: (id) => core.messages.current(id) }, core.clock, log, held);
    this.deliveryQueue = queue;
    core.accountStatuses.onActivated((ids) => {
      void held.release(ids).catch((err: unknown) => log.error({ err, account_ids: ids }, 'could not release held mail'));
    });
    void held.releaseActive().catch((err: unknown) => log.error({ err }, 'could not release the held mail of active accounts'));
    engine.register(messageKind(core.messagesRepo, queue, (domain) => router.mxSet(domain)));
    queue.attach(engine);
    core.messages.deliveringWith((id) => engine.holds('message', id));
    core.acceptor.onAccepted((records, bodies) => {
      // Sandbox mail is never sent and scheduled mail waits: only sends due now ask for a body soon.
      // Each, once dealt with, lets its hold go (DeliveryQueue.process).
      const sends = new Map<string, number>();
      for (const record of records) if (announcedSend(record)) sends.set(record.bodyId, (sends.get(record.bodyId) ?? 0) + 1);
      deliverer.remember(bodies, sends);
      for (const record of records) engine.notify(Date.parse(record.dueAt));
    });
    this.pool = pool;
    log.info({ rules: rules.length, concurrency: d.concurrency }, 'delivery started');
  }

  /** The control socket the CLI's queue and admin commands talk to while the daemon holds the store. */
  private startControl(): void {
    const { config, core_: core, log } = this;
    const d = config.delivery;
    const queue = new QueueAdmin({
      messages: core.messages,
      repo: core.messagesRepo,
      events: core.events,
      clock: core.clock,
      log,
      jobs: jobStore(core),
      routing: deliveryRouting(d, this.router ?? new Router(core.resolver, routerOptions(d), core.clock)),
      daemon: {
        delivery: this.engine && this.pool
          ? { scheduler: engineView(this.engine), limits: { concurrency: d.concurrency, perDestination: d.per_destination, readyLimit: d.ready_limit } }
          : null,
        engine: this.engine,
      },
    });
    const doctor = new DaemonDoctorReads(core.domainsRepo, () => this.heldListeners());
    this.bound.control.serve({ queue, admin: new CoreAdmin(core), doctor, backup: () => backupStream(core.store, config.keys.dir, core.clock) }, log);
  }

  /** The sockets held now, for `postilion doctor` (smtp needs a restart to change: its hosts are the bound ones). */
  private heldListeners(): HeldListener[] {
    const { submission, inbound } = this.config.smtp;
    return [
      ...(this.submission?.ports ?? []).map((p): HeldListener => ({ name: p.secure ? 'smtp-tls' : 'smtp-starttls', host: submission.host, port: p.port })),
      ...this.listeners.map((l, i) => heldAt(i === 0 ? 'api' : 'api-tls', l.url)),
      ...(this.inbound ? [{ name: 'inbound' as const, host: inbound.host, port: this.inbound.port }] : []),
      ...(this.trackingListener ? [heldAt('tracking', this.trackingListener.url)] : []),
      ...(this.metricsListener ? [heldAt('metrics', this.metricsListener.url)] : []),
    ];
  }

  /** SMTP submission: STARTTLS and implicit-TLS listeners feeding the same accept() as the API. */
  private async startSubmission(): Promise<SubmissionListeners | null> {
    const { config, core_: core, log } = this;
    const s = config.smtp.submission;
    const ports = [
      ...(s.starttls_port !== null ? [{ port: s.starttls_port, secure: false, bound: this.bound.smtpStarttls ?? undefined }] : []),
      ...(s.tls_port !== null ? [{ port: s.tls_port, secure: true, bound: this.bound.smtpTls ?? undefined }] : []),
    ];
    if (ports.length === 0) {
      log.warn('smtp.submission is enabled but both of its ports are null: no listener');
      return null;
    }
    const certPath = resolve(config.keys.dir, s.cert);
    const tls = await loadOrCreateCertificate(certPath, resolve(config.keys.dir, s.key), config.server.hostname);
    if (tls.created) log.info({ cert: certPath, hostname: config.server.hostname }, 'self-signed SMTP certificate created');
    return SubmissionListeners.start(
      {
        host: s.host,
        ports,
        hostname: config.server.hostname,
        tls,
        maxMessageBytes: s.max_message_bytes,
        maxRecipients: s.max_recipients,
        plainAuthFrom: s.plain_auth_from.map(parseCidr),
        graceMs: config.shutdown.grace_seconds * 1000,
        maxConnectionsPerAddress: s.max_connections_per_address,
        deadlines: { commandMs: config.smtp.command_deadline_seconds * 1000, dataMs: config.smtp.data_deadline_seconds * 1000 },
      },
      {
        credentials: core.smtpCredentials,
        accounts: core.accounts,
        relay: new Relay(core.domains, core.acceptor, core.clock, config.server.hostname, () => new DataSpool(core.store, core.messagesRepo), core.trackingUrls),
        throttle: new AuthThrottle(s.auth_failures.limit, s.auth_failures.window_seconds * 1000, core.clock),
        log,
        storage: this.storage,
        observer: {
          session: (listener, result) => this.metrics.smtpSessions.inc({ listener, result }),
          command: (listener, command, result) => this.metrics.smtpCommands.inc({ listener, command, result }),
        },
      },
    );
  }

  /**
   * The inbound MX: recipients decided by the InboundPolicy, messages stored by the Intake (route
   * jobs for the engine), bounces and complaints taken in by Reports.
   */
  private async startInbound(): Promise<InboundListener> {
    const { config, core_: core, log } = this;
    const i = config.smtp.inbound;
    const s = config.smtp.submission;
    const tls = await loadOrCreateCertificate(resolve(config.keys.dir, s.cert), resolve(config.keys.dir, s.key), config.server.hostname);
    const reports = new Reports({
      readBounce: (raw) => readBounce(raw, this.bounceRules),
      readComplaint: (raw) => readComplaint(raw),
      verp: core.verp,
      message: (id) => core.messages.current(id),
      messagesByHeader: (accountId, header) => core.messagesRepo.findByMessageId(accountId, header),
      lateBounce: (id, classification, text) => this.outcomes.lateBounce(id, classification, text),
      complaint: (accountId, email, domain, reason) => core.suppressions.complaint(accountId, email, domain, reason),
      log,
    });
    const intake = new Intake({
      store: core.store,
      repo: core.inboundRepo,
      jobs: core.jobs,
      events: core.events,
      groupsByMessageId: async (routeId) => (await core.routes.target(routeId))?.groupByMessageId ?? false,
      reports,
      clock: core.clock,
      log,
      notify: (dueMs) => this.engine?.notify(dueMs),
    });
    const resumed = await intake.resume();
    if (resumed > 0) log.info({ messages: resumed }, 'inbound bounces and complaints left by a stop taken in');
    return InboundListener.start(
      {
        host: i.host,
        port: i.port,
        bound: this.bound.smtpInbound ?? undefined,
        hostname: config.server.hostname,
        tls,
        maxMessageBytes: i.max_message_bytes,
        maxRecipients: i.max_recipients,
        maxConnectionsPerAddress: i.max_connections_per_address,
        graceMs: config.shutdown.grace_seconds * 1000,
        deadlines: { commandMs: config.smtp.command_deadline_seconds * 1000, dataMs: config.smtp.data_deadline_seconds * 1000 },
      },
      {
        policy: new InboundPolicy({
          domainByName: (name) => core.domainsRepo.getByName(name),
          routesAt: (accountId, domain) => core.routes.routesAt(accountId, domain),
          verp: core.verp,
        }),
        intake,
        repo: core.inboundRepo,
        newSpool: () => new DataSpool(core.store, core.messagesRepo),
        log,
        observer: this.metrics.inbound,
        storage: this.storage,
      },
    );
  }

  /** What /readyz reports: the store open and every configured listener bound. */
  private readiness(): Array<{ name: string; ok: boolean }> {
    const { config } = this;
    return [
      { name: 'store', ok: this.core_.store.isOpen && this.stopping === null },
      { name: this.storage.ok ? 'storage' : `storage (${this.storage.reason})`, ok: this.storage.ok },
      { name: 'api', ok: this.listeners.length === (config.api.tls.enabled ? 2 : 1) },
      { name: 'control', ok: this.control !== null },
      ...(config.smtp.submission.enabled ? [{ name: 'smtp-submission', ok: this.submission !== null }] : []),
      ...(config.smtp.inbound.enabled ? [{ name: 'smtp-inbound', ok: this.inbound !== null }] : []),
      ...(config.tracking.enabled ? [{ name: 'tracking', ok: this.trackingListener?.running === true }] : []),
    ];
  }

  /** The metrics listener's base URL. */
  get metricsUrl(): string {
    if (!this.metricsListener) throw new Error('the metrics listener is off (metrics.enabled: false)');
    return this.metricsListener.url;
  }

  /** Resolves once the opens and clicks answered so far are written (tests). */
  async trackingHitsDrained(): Promise<void> {
    await this.trackingListener?.sync();
    await this.trackingHits?.drain();
  }

  /** The tracking listener's base URL (null when it is off). */
  get trackingUrl(): string | null {
    return this.trackingListener?.url ?? null;
  }

  /** The inbound MX listener's bound port (null when it is off). */
  get inboundPort(): number | null {
    return this.inbound?.port ?? null;
  }

  /** The SMTP submission listeners' bound ports (empty when submission is off). */
  get submissionPorts(): Array<{ port: number; secure: boolean }> {
    return this.submission?.ports ?? [];
  }

  /** The job engine, for tests and the operator's queue view (null when mail delivery is off). */
  get scheduler(): JobEngine | null {
    return this.pool ? this.engine : null;
  }

  /** The job engine (mail and webhooks). */
  get jobEngine(): JobEngine {
    return this.engine!;
  }

  /** The webhook fan-out (tests wait for it to catch up). */
  get webhookFanout(): WebhookFanout {
    return this.fanout!;
  }

  /**
   * Applies what can change without a restart; names every changed key that needs one (the table
   * in config/reload.ts), which keeps its running value. Everything that can fail (reading
   * certificate files) happens before anything is applied, so a failed reload changes nothing.
   */
  reload(next: Config): { applied: string[]; restartNeededFor: string[]; tlsReloaded: string[] } {
    const plan = reloadPlan(this.config, next);
    const config = applyLive(this.config, next, plan.live);
    const tls = config.api.tls.enabled && this.listeners.length > 1 ? readTls(config) : null;
    const submission = config.smtp.submission;
    const smtpTls = this.submission && submission.enabled ? readCertificate(resolve(config.keys.dir, submission.cert), resolve(config.keys.dir, submission.key)) : null;

    this.log.level = config.log.level;
    this.rateLimiter.configure(config.api.rate_limits);
    this.refusalLimiter.configure(config.api.auth_failures);
    this.core_.idempotency.configure(config.api.idempotency);
    this.settings = apiSettings(config);
    this.trackingListener?.configure(config.api.trusted_proxies);
    if (tls) for (const listener of this.listeners) listener.reloadTls(tls);
    if (smtpTls) this.submission?.reloadTls(smtpTls);
    if (smtpTls) this.inbound?.reloadTls(smtpTls);
    this.config = config;
    const tlsReloaded = [...(tls ? ['api'] : []), ...(smtpTls ? ['smtp-submission'] : [])];
    this.log.info({ applied: plan.live, restart_needed_for: plan.restart, tls_reloaded: tlsReloaded }, 'configuration reloaded');
    return { applied: plan.live, restartNeededFor: plan.restart, tlsReloaded };
  }

  /** The configuration the daemon runs with (after reloads: the live keys of the last file read). */
  get runningConfig(): Config {
    return this.config;
  }

  /** Outcomes the store refused are written no more: their jobs may run again after the restart. */
  private giveUpUnstoredOutcomes(): void {
    this.deliveryQueue?.giveUpUnstoredOutcomes();
    this.httpOutcomes.giveUp();
  }

  /** Stops accepting, drains in-flight requests within the grace period, closes the store. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const graceMs = this.config.shutdown.grace_seconds * 1000;
      this.log.info({ grace_seconds: this.config.shutdown.grace_seconds }, 'stopping');
      await Promise.all([
        ...this.listeners.map((l) => l.close(graceMs)),
        this.control?.close(graceMs),
        this.submission?.close(),
        this.inbound?.close(),
        this.metricsListener?.close(),
        this.trackingListener?.close(graceMs),
      ]);
      // A step that cannot write (a full disk) must not keep the rest from stopping: what was
      // acknowledged is already synced.
      const tried = (step: string) => (err: unknown) => this.log.warn({ err, step }, 'could not finish a step of the stop; stopping all the same');
      // Opens and clicks already answered are written before the store closes.
      await this.trackingHits?.drain().catch(tried('tracking hits'));
      await this.fanout?.stop().catch(tried('webhook fan-out cursor'));
      this.storage.stop();
      if (this.engine) {
        // Outcomes the store refuses are not waited for: it would not take them within the grace period.
        if (!this.storage.ok) this.giveUpUnstoredOutcomes();
        // Attempts in flight finish (within the grace period); queued work stays in the store.
        await this.engine.stop(graceMs);
        this.giveUpUnstoredOutcomes();
        this.pool?.close();
        this.http?.routes.close();
        await this.http?.webhooks.close();
        // The attempts cut by closing the connections record their outcome before the store closes.
        await this.engine.stop(1000);
      }
      for (const job of this.jobs) await Promise.resolve(job.stop()).catch(tried('scheduled jobs'));
      // The sockets of listeners that never started (a start that failed half-way).
      await this.bound.close().catch(tried('listeners'));
      await this.core_.store.close().catch(tried('store close'));
      this.log.info('stopped');
    })();
    return this.stopping;
  }
}

/**
 * The daemon's metrics and what feeds them from the core: store commits, landed delivery events,
 * DKIM signatures, the queue and the HTTP jobs' backlog (read through the operator's queue view).
 * The API, the SMTP listeners, the HTTP job kinds and the tracking listener feed theirs where they
 * are built; `collect` brings in the tracking thread's counts before each scrape.
 */
function instrument(config: Config, core: Core, log: Logger, collect: () => Promise<void>): Metrics {
  const queue = new QueueAdmin({ messages: core.messages, repo: core.messagesRepo, events: core.events, clock: core.clock, jobs: jobStore(core), daemon: null });
  // A scan cut by the store reopening after a failed write serves the last figures (their age is exported).
  let last: QueueSnapshot = { destinations: [], jobs: [] };
  const metrics = new Metrics({
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
  }, collect);
  core.store.observeCommits((seconds, operations, writers) => {
    metrics.storeCommitDuration.observe(seconds);
    metrics.storeBatchOps.observe(operations);
    metrics.storeBatchWriters.observe(writers);
  });
  core.store.onPut('events', (_key, value) => metrics.countEvent(value as Parameters<Metrics['countEvent']>[0]));
  core.signer.onSigned = (algorithm) => metrics.dkimSignatures.inc({ algorithm });
  log.debug('metrics instruments attached');
  return metrics;
}

/** What the operator's queue view reads of HTTP jobs and suspensions. */
export function jobStore(core: Core): NonNullable<ConstructorParameters<typeof QueueAdmin>[0]['jobs']> {
  return {
    index: core.jobIndex,
    repo: core.jobs,
    meta: core.meta,
    targetUrl: async (kind, id) => (kind === 'webhook' ? await core.webhooksRepo.get(id) : await core.routes.target(id))?.url,
  };
}

/** The engine as the operator's view of mail sees it. */
function engineView(engine: JobEngine): { snapshot: JobEngine['snapshot']; wake: () => Promise<void>; holds: (id: string) => boolean } {
  return { snapshot: () => engine.snapshot(), wake: () => engine.wake(), holds: (id) => engine.holds('message', id) };
}

/** `host:port` or `[v6]:port`. */
function hostPort(text: string): { host: string; port: number } {
  const colon = text.lastIndexOf(':');
  return { host: text.slice(0, colon).replace(/^\[|\]$/g, ''), port: Number(text.slice(colon + 1)) };
}

export function storageSettings(config: Config): StorageSettings {
  return { minFreeBytes: config.storage.min_free_bytes, minFreePercent: config.storage.min_free_percent, checkIntervalMs: config.storage.check_interval_ms };
}

function apiSettings(config: Config): ApiSettings {
  return {
    trustedProxies: config.api.trusted_proxies.map(parseCidr),
    bodyLimitBytes: config.api.body_limit_bytes,
    bodyMemoryBytes: config.api.body_memory_bytes,
  };
}

function readTls(config: Config): { cert: Buffer; key: Buffer } {
  return readTlsFiles(config.keys.dir, config.api.tls, 'api.tls');
}

/** The reply classification rules; a file that cannot be read or parsed stops the start. */
function readBounceRules(file: string): BounceRule[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`delivery.bounce_rules: cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    return parseBounceRules(text, file);
  } catch (err) {
    if (err instanceof BounceRulesError) throw new ConfigError(`delivery.bounce_rules: ${err.message}`);
    throw err;
  }
}
