import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BounceRulesError, parseBounceRules, type BounceRule } from '../bounce/rules.ts';
import { ConfigError } from '../config/load.ts';
import { announcedSend, Deliverer } from '../delivery/deliverer.ts';
import { Router, routerOptions } from '../delivery/router.ts';
import { SmtpPool } from '../delivery/smtp-pool.ts';
import { SourceSet } from '../delivery/sources/sources.ts';
import { WarmupCounter } from '../delivery/sources/warmup-counter.ts';
import { SourceCountsRepo } from '../store/source-counts-repo.ts';
import { SourceChoice } from '../queue/source-choice.ts';
import { DeliveryQueue } from '../queue/delivery-queue.ts';
import { DsnSender } from '../queue/dsn-sender.ts';
import { HeldMail } from '../queue/held-mail.ts';
import { messageKind } from '../queue/message-kind.ts';
import { Outcomes } from '../queue/outcomes.ts';
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
  readonly sections = ['delivery'];
  /** `config/bounce-rules` (or delivery.bounce_rules): replies and bounces are classified with them. */
  readonly bounceRules: BounceRule[];
  readonly outcomes: Outcomes;
  /** Null when delivery is off. */
  readonly delivery: Delivery | null = null;

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
    const router = new Router(core.resolver, routerOptions(d), core.clock);
    const pool = new SmtpPool({
      hostname: config.server.hostname,
      messagesPerConnection: d.messages_per_connection,
      idleTimeoutMs: d.idle_timeout_ms,
      connectTimeoutMs: d.connect_timeout_ms,
      commandTimeoutMs: d.command_timeout_ms,
      tlsRejectUnauthorized: d.tls_reject_unauthorized,
    });
    const deliverer = new Deliverer(core.messagesRepo, core.domainsRepo, core.signer, router, pool, this.bounceRules, core.clock, (id) => core.verp.token(id));
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
    const { sources } = this.delivery;
    // Before the engine starts (it comes later in the daemon's list): a restart keeps the day's counts.
    if (sources) await sources.counter.load(sources.set.all());
    void this.delivery.held.releaseActive().catch((err: unknown) => log.error({ err }, 'could not release the held mail of active accounts'));
    log.info({ rules: this.bounceRules.length, concurrency: this.ctx.config.delivery.concurrency }, 'delivery started');
  }

  async drain(): Promise<void> {
    this.delivery?.pool.close();
  }

  /** After the engine stopped (close runs up the list): the day's last warm-up counts are written. */
  async close(): Promise<void> {
    await this.delivery?.sources?.counter.flush();
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
