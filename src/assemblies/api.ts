import { bootstrap, bootstrapDefaults, formatBootstrap } from '../accounts/bootstrap.ts';
import { buildApp, type ApiSettings } from '../api/app.ts';
import { RateLimiter, RefusalLimiter, type AnyRateLimiter, type AnyRefusalLimiter } from '../api/middleware/rate-limit.ts';
import { ApiListener } from '../api/server.ts';
import type { MessagesElsewhere } from '../cluster/remote-messages.ts';
import type { Config } from '../config/schema.ts';
import { heldAt, type HeldListener } from '../control/doctor-protocol.ts';
import { publishedPolicies } from '../domains/mta-sts-policy.ts';
import { parseCidr } from '../util/cidr.ts';
import { readTlsFiles } from '../util/tls-files.ts';
import { notFound } from '../util/errors.ts';
import { defaultAssetsDir } from '../dashboard/assets.ts';
import { dashboardRoutes } from '../dashboard/activity.ts';
import { dashboardHooks } from '../dashboard/app.ts';
import { rawAnswerHeaders } from '../dashboard/headers.ts';
import { clusterView, operatorRoutes } from '../dashboard/operator.ts';
import { readClusterStatus } from '../cluster/status.ts';
import type { ControlHandlers, UiSignIn } from '../control/server.ts';
import { uiSignIn } from '../dashboard/login-links.ts';
import { sendTestEvent } from '../webhooks/test-event.ts';
import type { JobsAssembly } from './jobs.ts';
import { DashboardSessions, type SessionSettings } from '../dashboard/sessions.ts';
import { DashboardSessionsRepo } from '../store/dashboard-sessions-repo.ts';
import type { Assembly, Context, Readiness } from './lifecycle.ts';

/** What the dashboard's pages read from other assemblies (daemon.ts wires them). */
export interface DashboardWiring {
  /** The webhook and route requests kept in memory, and the engine a test event wakes. */
  jobs?: JobsAssembly;
  /** The control socket's handlers (the operator's page), null until the control assembly has started. */
  control?: () => ControlHandlers | null;
  /** Each component's readiness, as /readyz reports it. */
  readiness?: () => Readiness[];
}

/**
 * The HTTP API: the Koa app over the services, its plain listener and (api.tls) its HTTPS one.
 * Its limits, body sizes, trusted proxies and certificate files change live at a reload. On the
 * first start of an empty store it makes the bootstrap account and shows its key once.
 */
export class ApiAssembly implements Assembly {
  readonly name = 'api';
  readonly sections = ['api', 'mta_sts_policy', 'dashboard'];
  /** The web dashboard's sessions and the operator's sign-in links (`postilion ui login` takes them here). */
  readonly dashboardSessions: DashboardSessions;
  private readonly listeners: ApiListener[] = [];
  private readonly rateLimiter: AnyRateLimiter;
  private readonly refusalLimiter: AnyRefusalLimiter;
  private settings: ApiSettings;
  private config: Config;

  constructor(
    private readonly ctx: Context,
    /** Where a one-time secret is shown to the operator (stdout), never the log. */
    private readonly announce: (text: string) => void,
    /** Cluster mode: messages other nodes hold (null: one node). */
    private readonly elsewhere: MessagesElsewhere | null = null,
    /** What the dashboard's operator and activity pages read beyond the core (absent: those pages answer 503 / show nothing kept). */
    private readonly wiring: DashboardWiring = {},
    /** Where the dashboard's built files are (default dist/ui of this package). */
    private readonly assetsDir: string = defaultAssetsDir(),
  ) {
    const { config, core } = ctx;
    this.config = config;
    this.dashboardSessions = new DashboardSessions(new DashboardSessionsRepo(core.store), core.clock, () => sessionSettings(this.config));
    this.rateLimiter = new RateLimiter(config.api.rate_limits, core.clock, ctx.limits?.buckets);
    this.refusalLimiter = new RefusalLimiter(config.api.auth_failures, core.clock, ctx.limits?.buckets);
    this.settings = apiSettings(config);
    countPolicies(ctx.metrics, config);
  }

  async start(): Promise<void> {
    const { config, core, log, bound, metrics, storage } = this.ctx;
    const app = buildApp({
      log,
      accounts: core.accounts,
      apiKeys: core.apiKeys,
      domains: core.domains,
      dnsChecker: core.dnsChecker,
      sender: core.sender,
      messages: core.messages,
      messagesElsewhere: this.elsewhere,
      messageReads: core.messageReads,
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
      metrics,
      settings: () => this.settings,
      storage,
      dashboard: this.dashboard(),
    });
    const handler = app.callback();
    this.listeners.push(
      await ApiListener.start({ host: config.api.host, port: config.api.port, bound: bound.api, log, headersFor: rawAnswerHeaders }, handler),
    );
    if (config.api.tls.enabled) {
      this.listeners.push(
        await ApiListener.start(
          { host: config.api.tls.host, port: config.api.tls.port, bound: bound.apiTls ?? undefined, tls: readTls(config), log, headersFor: rawAnswerHeaders },
          handler,
        ),
      );
    }
    log.info({ urls: this.urls }, 'API listening');

    if (!(await core.accounts.hasAny())) {
      const result = await bootstrap(core.store, core.accounts, core.apiKeys, bootstrapDefaults(config.server.hostname));
      log.info({ account_id: result.account.id, key_id: result.key.id }, 'bootstrap account and admin key created');
      this.announce(formatBootstrap(result, this.url));
    }
  }

  /** The dashboard's part of the app: its sessions, and the routes of activity.ts and operator.ts. */
  private dashboard() {
    const { core, metrics, storage } = this.ctx;
    const { jobs, control, readiness } = this.wiring;
    const cluster = core.cluster;
    const routes = [
      ...dashboardRoutes({
        messages: core.messages,
        events: core.eventsRepo,
        domains: core.domains,
        dnsChecker: core.dnsChecker,
        webhooks: core.webhooks,
        routes: core.routes,
        attempts: jobs?.attempts ?? null,
        clock: core.clock,
        sendTestEvent: (account, webhook) =>
          sendTestEvent(
            { store: core.store, jobs: core.jobs, webhooks: core.webhooks, clock: core.clock, notify: (ms) => jobs?.engine.notify(ms) },
            account,
            webhook,
          ),
      }),
      ...operatorRoutes({
        control: control ?? (() => null),
        readiness: readiness ?? (() => []),
        nodes: () => (cluster ? readClusterStatus(cluster.pool).then((status) => clusterView(cluster.nodeId, status)) : null),
      }),
    ];
    return dashboardHooks({
      sessions: this.dashboardSessions,
      apiKeys: core.apiKeys,
      accounts: core.accounts,
      refusalLimiter: this.refusalLimiter,
      rateLimiter: this.rateLimiter,
      storage,
      metrics,
      settings: () => ({
        enabled: this.config.dashboard.enabled,
        bodyLimitBytes: this.settings.bodyLimitBytes,
        bodyMemoryBytes: this.settings.bodyMemoryBytes,
      }),
      routes,
      assetsDir: this.assetsDir,
    });
  }

  /** `postilion ui login` and `ui logout --all`, as the control socket serves them. */
  uiSignIn(): UiSignIn {
    const signIn = uiSignIn({
      sessions: this.dashboardSessions,
      ttlSeconds: () => this.config.dashboard.login_link_ttl_seconds,
      baseUrl: () => this.dashboardUrl,
      clock: this.ctx.core.clock,
    });
    return {
      // Turned off, the pages answer 404: so does the link (the command says so in one line).
      login: () => (this.config.dashboard.enabled ? signIn.login() : Promise.reject(notFound('the dashboard is turned off (dashboard.enabled: false)'))),
      logoutAll: () => signIn.logoutAll(),
    };
  }

  /** The base URL `postilion ui login` prints links under: dashboard.public_url, else the plain listener's. */
  get dashboardUrl(): string {
    return (this.config.dashboard.public_url ?? this.url).replace(/\/+$/, '');
  }

  /** The plain listener's base URL. */
  get url(): string {
    return this.listeners[0]!.url;
  }

  get urls(): string[] {
    return this.listeners.map((l) => l.url);
  }

  ready(): Readiness[] {
    return [{ name: 'api', ok: this.listeners.length === (this.ctx.config.api.tls.enabled ? 2 : 1) }];
  }

  held(): HeldListener[] {
    return this.listeners.map((l, i) => heldAt(i === 0 ? 'api' : 'api-tls', l.url));
  }

  reload(config: Config): () => string[] {
    const tls = config.api.tls.enabled && this.listeners.length > 1 ? readTls(config) : null;
    return () => {
      this.rateLimiter.configure(config.api.rate_limits);
      this.refusalLimiter.configure(config.api.auth_failures);
      this.ctx.core.idempotency.configure(config.api.idempotency);
      this.settings = apiSettings(config);
      this.config = config;
      countPolicies(this.ctx.metrics, config);
      if (tls) for (const listener of this.listeners) listener.reloadTls(tls);
      return tls ? ['api'] : [];
    };
  }

  async stopListening(graceMs: number): Promise<void> {
    await Promise.all(this.listeners.map((l) => l.close(graceMs)));
  }
}

function apiSettings(config: Config): ApiSettings {
  return {
    trustedProxies: config.api.trusted_proxies.map(parseCidr),
    bodyLimitBytes: config.api.body_limit_bytes,
    bodyMemoryBytes: config.api.body_memory_bytes,
    mtaStsPolicies: publishedPolicies(config),
  };
}

function sessionSettings(config: Config): SessionSettings {
  return { sessionTtlMs: config.dashboard.session_ttl_minutes * 60_000, loginLinkTtlMs: config.dashboard.login_link_ttl_seconds * 1000 };
}

/** The published MTA-STS policies by mode, in /metrics. */
function countPolicies(metrics: Context['metrics'], config: Config): void {
  for (const mode of ['enforce', 'testing', 'none'] as const) {
    metrics.mtaStsPolicies.set({ mode }, Object.values(config.mta_sts_policy.domains).filter((p) => p.mode === mode).length);
  }
}

function readTls(config: Config): { cert: Buffer; key: Buffer } {
  return readTlsFiles(config.keys.dir, config.api.tls, 'api.tls');
}
