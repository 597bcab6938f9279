import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { schedule, type ScheduledTask } from 'node-cron';
import { Accounts } from './accounts/accounts.ts';
import { ApiKeys } from './accounts/api-keys.ts';
import { bootstrap, bootstrapDefaults, formatBootstrap } from './accounts/bootstrap.ts';
import type { DomainOwnership } from './accounts/scopes.ts';
import { buildApp, type ApiSettings } from './api/app.ts';
import { Idempotency } from './api/middleware/idempotency.ts';
import { RateLimiter } from './api/middleware/rate-limit.ts';
import { ApiListener } from './api/server.ts';
import type { Config } from './config/schema.ts';
import type { Logger } from './logging/logger.ts';
import { AccountsRepo } from './store/accounts-repo.ts';
import { ApiKeysRepo } from './store/api-keys-repo.ts';
import { IdempotencyRepo } from './store/idempotency-repo.ts';
import { Store } from './store/store.ts';
import { parseCidr } from './util/cidr.ts';
import { SecretBox } from './util/secret-box.ts';
import { systemClock, type Clock } from './util/time.ts';

/** Domains arrive with the domains capability; until then an account owns none. */
const noDomains: DomainOwnership = async () => null;

/** The store and the domain services: what the daemon serves and what admin commands use. */
export interface Core {
  config: Config;
  store: Store;
  box: SecretBox;
  accounts: Accounts;
  apiKeys: ApiKeys;
  idempotency: Idempotency;
  clock: Clock;
}

export async function openCore(
  config: Config,
  clock: Clock = systemClock,
  ownership: DomainOwnership = noDomains,
): Promise<Core> {
  const box = SecretBox.loadOrCreate(join(config.keys.dir, 'secret-box.key'));
  const store = await Store.open(resolve(config.data.dir));
  return {
    config,
    store,
    box,
    accounts: new Accounts(store, new AccountsRepo(store), clock),
    apiKeys: new ApiKeys(store, new ApiKeysRepo(store), ownership, clock),
    idempotency: new Idempotency(new IdempotencyRepo(store), box, config.api.idempotency, clock),
    clock,
  };
}

export interface DaemonOptions {
  config: Config;
  log: Logger;
  /** Where a one-time secret is shown to the operator (stdout), never the log. */
  announce: (text: string) => void;
  clock?: Clock;
  /** Which domains an account owns (until the domains capability provides it). */
  domainOwnership?: DomainOwnership;
}

/**
 * The composition root: builds the components, starts them in order (store → jobs → listeners)
 * and stops them in reverse. No business logic lives here.
 */
export class Daemon {
  private readonly listeners: ApiListener[] = [];
  private readonly jobs: ScheduledTask[] = [];
  private settings: ApiSettings;
  private stopping: Promise<void> | null = null;

  private constructor(
    private config: Config,
    private readonly core_: Core,
    private readonly log: Logger,
    private readonly rateLimiter: RateLimiter,
  ) {
    this.settings = apiSettings(config);
  }

  static async start(options: DaemonOptions): Promise<Daemon> {
    const { config, log } = options;
    const core = await openCore(config, options.clock, options.domainOwnership);
    const daemon = new Daemon(config, core, log, new RateLimiter(config.api.rate_limits, core.clock));
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

    const app = buildApp({
      log,
      accounts: core.accounts,
      apiKeys: core.apiKeys,
      idempotency: core.idempotency,
      rateLimiter: this.rateLimiter,
      settings: () => this.settings,
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
    );

    const handler = app.callback();
    this.listeners.push(await ApiListener.start({ host: config.api.host, port: config.api.port }, handler));
    if (config.api.tls.enabled) {
      this.listeners.push(
        await ApiListener.start({ host: config.api.tls.host, port: config.api.tls.port, tls: readTls(config) }, handler),
      );
    }
    log.info({ urls: this.urls }, 'API listening');

    if (!(await core.accounts.hasAny())) {
      const result = await bootstrap(core.store, core.accounts, core.apiKeys, bootstrapDefaults(config.server.hostname));
      log.info({ account_id: result.account.id, key_id: result.key.id }, 'bootstrap account and admin key created');
      announce(formatBootstrap(result, this.apiUrl));
    }
  }

  /**
   * Applies what can change without a restart; says what needs one. Everything that can fail
   * (reading certificate files) happens before anything is applied, so a failed reload changes
   * nothing.
   */
  reload(next: Config): void {
    const tls = next.api.tls.enabled && this.listeners.length > 1 ? readTls(next) : null;
    const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
    const listenerShape = (c: Config) => ({ host: c.api.host, port: c.api.port, tls: { enabled: c.api.tls.enabled, host: c.api.tls.host, port: c.api.tls.port } });
    const restartNeeded: string[] = (['data', 'keys', 'server'] as const).filter((k) => !same(next[k], this.config[k]));
    if (!same(listenerShape(next), listenerShape(this.config))) restartNeeded.push('api listeners');
    if (next.api.idempotency.purge_schedule !== this.config.api.idempotency.purge_schedule) {
      restartNeeded.push('api.idempotency.purge_schedule');
    }

    this.log.level = next.log.level;
    this.rateLimiter.configure(next.api.rate_limits);
    this.core_.idempotency.configure(next.api.idempotency);
    this.settings = apiSettings(next);
    if (tls) for (const listener of this.listeners) listener.reloadTls(tls);
    this.config = { ...next, data: this.config.data, keys: this.config.keys, server: this.config.server };
    this.log.info({ restart_needed_for: restartNeeded }, 'configuration reloaded');
  }

  /** Stops accepting, drains in-flight requests within the grace period, closes the store. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const graceMs = this.config.shutdown.grace_seconds * 1000;
      this.log.info({ grace_seconds: this.config.shutdown.grace_seconds }, 'stopping');
      await Promise.all(this.listeners.map((l) => l.close(graceMs)));
      for (const job of this.jobs) await job.stop();
      await this.core_.store.close();
      this.log.info('stopped');
    })();
    return this.stopping;
  }
}

function apiSettings(config: Config): ApiSettings {
  return {
    trustedProxies: config.api.trusted_proxies.map(parseCidr),
    bodyLimitBytes: config.api.body_limit_bytes,
  };
}

function readTls(config: Config): { cert: Buffer; key: Buffer } {
  const cert = resolve(config.keys.dir, config.api.tls.cert);
  const key = resolve(config.keys.dir, config.api.tls.key);
  for (const path of [cert, key]) {
    if (!existsSync(path)) throw new Error(`api.tls is enabled but ${path} does not exist`);
  }
  return { cert: readFileSync(cert), key: readFileSync(key) };
}
