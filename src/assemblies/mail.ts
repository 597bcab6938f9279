import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { schedule, type ScheduledTask } from 'node-cron';
import { BounceRulesError, parseBounceRules, type BounceRule } from '../bounce/rules.ts';
import { ConfigError } from '../config/load.ts';
import { announcedSend, Deliverer } from '../delivery/deliverer.ts';
import { Router, routerOptions } from '../delivery/router.ts';
import { SmtpPool } from '../delivery/smtp-pool.ts';
import { TlsReports } from '../delivery/tls-reports/tls-reports.ts';
import { MtaSts } from '../delivery/tls-policy/mta-sts.ts';
import { TlsaLookups } from '../delivery/tls-policy/tlsa-lookup.ts';
import { TlsPolicies } from '../delivery/tls-policy/tls-policies.ts';
import { DnsWireClient } from '../domains/dns-wire.ts';
import { deliveryTlsMetrics } from '../metrics/delivery-tls.ts';
import { MtaStsRepo } from '../store/mta-sts-repo.ts';
import type { Config } from '../config/schema.ts';
import type { Core } from './core.ts';
import type { Logger } from 'pino';
import { SourceSet } from '../delivery/sources/sources.ts';
import { WarmupCounter } from '../delivery/sources/warmup-counter.ts';
import { SourceCountsRepo } from '../store/source-counts-repo.ts';
import { SourceChoice } from '../queue/source-choice.ts';
import { DeliveryQueue } from '../queue/delivery-queue.ts';
import { DsnSender } from '../queue/dsn-sender.ts';
import { HeldMail } from '../queue/held-mail.ts';
import { messageKind } from '../queue/message-kind.ts';
import { Outcomes } from '../queue/outcomes.ts';
import { onAttemptReply } from '../queue/shaping/lane-shaping.ts';
import { TlsReportMailer } from '../queue/tls-report-mailer.ts';
import { TlsReportsRepo } from '../store/tls-reports-repo.ts';
import { parseCidr } from '../util/cidr.ts';
import type { JobsAssembly } from './jobs.ts';
import type { Assembly, Context } from './lifecycle.ts';

/** Outbound mail when delivery is on: the router, SMTP sessions, DKIM, the deliverer and its outcomes. */
interface Delivery {
  router: Router;
  pool: SmtpPool;
  held: HeldMail;
  /** Null when no delivery source is configured. */
  sources: Sources | null;
}

/**
 * Outbound mail: the outcome rules of mail (shared with the inbound side, for late bounces) and,
 * when delivery is on, the message job kind: router, SMTP pool, deliverer, held mail of accounts
 * that are not active. Accepted mail due now wakes the engine and is remembered for its send.
 */
export class MailAssembly implements Assembly {
  readonly name = 'mail';
  readonly sections = ['delivery', 'tls_reporting'];
  /** `config/bounce-rules` (or delivery.bounce_rules): replies and bounces are classified with them. */
  readonly bounceRules: BounceRule[];
  readonly outcomes: Outcomes;
  /** Null when delivery is off. */
  readonly delivery: Delivery | null = null;
  /** TLS reporting (tls_reporting), the sink of every delivery session's TLS result; null when off. */
  readonly tlsReports: TlsReports | null = null;
  private tlsReportTimers: { flush: NodeJS.Timeout; daily: ScheduledTask } | null = null;

  constructor(
    private readonly ctx: Context,
    jobs: JobsAssembly,
  ) {
    const { config, core, log, signals } = ctx;
    const d = config.delivery;
    const rulesFile = d.bounce_rules ? resolve(d.bounce_rules) : fileURLToPath(new URL('../../config/bounce-rules', import.meta.url));
    this.bounceRules = readBounceRules(rulesFile);
    const retry = {
      firstDelayMs: d.retry.first_delay_seconds * 1000,
      maxDelayMs: d.retry.max_delay_seconds * 1000,
      maxAgeMs: d.retry.max_age_hours * 3_600_000,
      jitter: d.retry.jitter,
    };
    const dsn = new DsnSender(core.domainsRepo, core.accountsRepo, core.messagesRepo, core.acceptor, config.server.hostname);
    this.outcomes = new Outcomes(core.messages, core.messagesRepo, core.events, retry, core.suppressions, dsn);
    if (!d.enabled) return;

    const { engine } = jobs;
    this.tlsReports = tlsReportsOf(ctx);
    const router = new Router(core.resolver, routerOptions(d), core.clock);
    const extraCa = readCaFile(d.mta_sts.ca_file);
    const pool = new SmtpPool({
      hostname: config.server.hostname,
      messagesPerConnection: d.messages_per_connection,
      idleTimeoutMs: d.idle_timeout_ms,
      connectTimeoutMs: d.connect_timeout_ms,
      commandTimeoutMs: d.command_timeout_ms,
      tlsRejectUnauthorized: d.tls_reject_unauthorized,
      extraCa,
    });
    const { shaping } = jobs;
    const deliverer = new Deliverer(
      core.messagesRepo,
      core.domainsRepo,
      core.signer,
      router,
      pool,
      this.bounceRules,
      core.clock,
      (id) => core.verp.token(id),
      undefined,
      {
        tlsPolicies: tlsPolicies(config, core, extraCa, log),
        tlsReports: this.tlsReports ?? undefined,
        onTls: deliveryTlsMetrics(ctx.metrics.registry),
        shaping: shaping ?? undefined,
      },
    );
    const held = new HeldMail(
      (id) => core.accountsRepo.getAccount(id),
      core.messages,
      core.messagesRepo,
      log,
      (dueMs) => engine.notify(dueMs),
    );
    const sources = buildSources(d, core, log);
    const choice = sources?.choice;
    const queue = new DeliveryQueue(deliverer, this.outcomes, core.suppressions, { get: (id) => core.messages.current(id) }, core.clock, log, {
      held,
      engine,
      writer: jobs.writer,
      replied: shaping
        ? onAttemptReply(shaping, {
            pause: (lane, untilMs) => engine.pause(lane, untilMs),
            count: (provider, rule, action) => ctx.metrics.shapingThrottles.inc({ provider, rule, action }),
          })
        : undefined,
      ...(choice ? { sources: choice } : {}),
    });
    engine.register(messageKind(core.messagesRepo, queue, (domain) => router.mxSet(domain), choice ? (message) => choice.choose(message) : undefined));
    signals.on('accounts.activated', (ids) => {
      void held.release(ids).catch((err: unknown) => log.error({ err, account_ids: ids }, 'could not release held mail'));
    });
    signals.on('messages.accepted', ({ records, bodies }) => {
      // Sandbox mail is never sent and scheduled mail waits: only sends due now ask for a body soon.
      // Each, once dealt with, lets its hold go (DeliveryQueue.process).
      const sends = new Map<string, number>();
      for (const record of records) if (announcedSend(record)) sends.set(record.bodyId, (sends.get(record.bodyId) ?? 0) + 1);
      deliverer.remember(bodies, sends);
      for (const record of records) engine.notify(Date.parse(record.dueAt));
    });
    this.delivery = { router, pool, held, sources };
  }

  async start(): Promise<void> {
    if (!this.delivery) return;
    const { log } = this.ctx;
    this.startTlsReports();
    const { sources } = this.delivery;
    // Before the engine starts (it comes later in the daemon's list): a restart keeps the day's counts.
    if (sources) await sources.counter.load(sources.set.all());
    void this.delivery.held.releaseActive().catch((err: unknown) => log.error({ err }, 'could not release the held mail of active accounts'));
    log.info({ rules: this.bounceRules.length, concurrency: this.ctx.config.delivery.concurrency }, 'delivery started');
  }

  private startTlsReports(): void {
    const reports = this.tlsReports;
    if (!reports) return;
    const { config, log } = this.ctx;
    const flush = setInterval(() => {
      reports.flush().catch((err: unknown) => log.error({ err }, 'TLS session counts could not be written'));
    }, config.tls_reporting.flush_seconds * 1000);
    const daily = schedule(
      config.tls_reporting.schedule,
      async () => {
        await reports.sendReports().catch((err: unknown) => log.error({ err }, 'the TLS reports could not be sent'));
      },
      { name: 'tls-reports', noOverlap: true, timezone: 'Etc/UTC' },
    );
    this.tlsReportTimers = { flush, daily };
    // Said at the start rather than at the first report, a day later.
    const submitter = config.tls_reporting.from.slice(config.tls_reporting.from.lastIndexOf('@') + 1).toLowerCase();
    void this.ctx.core.domainsRepo.getByName(submitter).then(
      (domain) => {
        if (!domain)
          log.warn({ from: config.tls_reporting.from }, 'tls_reporting.from is not at a domain of this server: TLS reports by mail will not be sent');
      },
      () => undefined,
    );
  }

  async drain(): Promise<void> {
    this.delivery?.pool.close();
    if (this.tlsReportTimers) {
      clearInterval(this.tlsReportTimers.flush);
      await this.tlsReportTimers.daily.stop();
      this.tlsReportTimers = null;
    }
    // The sessions of the deliveries that ended in the drain are counted before the store closes.
    await this.tlsReports?.flush().catch((err: unknown) => this.ctx.log.error({ err }, 'TLS session counts could not be written'));
  }

  /** After the engine stopped (close runs up the list): the day's last warm-up counts are written. */
  async close(): Promise<void> {
    await this.delivery?.sources?.counter.flush();
  }
}

/** The TLS reports' aggregator when tls_reporting is on; its settings checked here (a bad one stops the start). */
function tlsReportsOf(ctx: Context): TlsReports | null {
  const { config, core, log, metrics } = ctx;
  const t = config.tls_reporting;
  if (!t.enabled) return null;
  if (t.from === '') throw new ConfigError('tls_reporting.from: an address at a domain of this server is required when tls_reporting is enabled');
  let ca: Buffer | undefined;
  if (t.ca_file !== '') {
    try {
      ca = readFileSync(resolve(t.ca_file));
    } catch (err) {
      throw new ConfigError(`tls_reporting.ca_file: cannot read ${t.ca_file}: ${(err as Error).message}`);
    }
  }
  return new TlsReports(
    {
      repo: new TlsReportsRepo(core.store),
      commit: (ops) => core.store.commit(ops),
      clock: core.clock,
      resolver: core.resolver,
      mailer: new TlsReportMailer(core.domainsRepo, core.accountsRepo, core.acceptor, core.clock, t.from),
      log,
      observe: (method, result) => metrics.tlsReports.inc({ method, result }),
    },
    {
      organization: t.organization || config.server.hostname,
      contact: t.contact || t.from,
      maxDomainsPerDay: t.max_domains_per_day,
      timeoutMs: t.timeout_ms,
      allowNetworks: t.allow_networks.map(parseCidr),
      ca,
    },
  );
}

/** The receiving domains' TLS policies: MTA-STS (delivery.mta_sts) and DANE (dns.dnssec). */
function tlsPolicies(config: Config, core: Core, extraCa: string | null, log: Logger): TlsPolicies {
  const m = config.delivery.mta_sts;
  const sts = m.enabled
    ? new MtaSts(
        core.resolver,
        new MtaStsRepo(core.store),
        {
          fetch: { resolver: core.resolver, port: m.port, timeoutMs: m.fetch_timeout_ms, extraCa, allowPrivate: m.allow_private },
          recheckMs: m.recheck_seconds * 1000,
        },
        core.clock,
        log,
      )
    : null;
  const { dns } = config;
  if (dns.dnssec && dns.servers.length === 0) {
    log.warn("dns.dnssec is on without dns.servers: the AD bit of the system's resolvers is trusted for DANE; name a validating resolver on a trusted path");
  }
  const dane = dns.dnssec ? new TlsaLookups(new DnsWireClient({ servers: dns.servers, timeoutMs: dns.timeout_ms, tries: dns.tries }), core.clock) : null;
  return new TlsPolicies(sts, dane);
}

/** delivery.mta_sts.ca_file, read once; a file that cannot be read stops the start. */
function readCaFile(file: string): string | null {
  if (!file) return null;
  try {
    const pem = readFileSync(resolve(file), 'utf8');
    if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new Error('no PEM certificate in it');
    return pem;
  } catch (err) {
    throw new ConfigError(`delivery.mta_sts.ca_file: cannot read ${file}: ${(err as Error).message}`);
  }
}

interface Sources {
  set: SourceSet;
  counter: WarmupCounter;
  choice: SourceChoice;
}

/** The delivery sources, their warm-up counts and the choice of a message's source; null when none is configured. */
function buildSources(d: Context['config']['delivery'], core: Context['core'], log: Context['log']): Sources | null {
  const set = SourceSet.fromConfig(d);
  if (!set) return null;
  const counter = new WarmupCounter(new SourceCountsRepo(core.store), core.clock, log);
  const choice = new SourceChoice(set, counter, d.account_pools, {
    account: (id) => core.accountsRepo.getAccount(id),
    messages: core.messages,
    repo: core.messagesRepo,
    clock: core.clock,
    log,
  });
  return { set, counter, choice };
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
