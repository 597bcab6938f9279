import type { Logger } from 'pino';
import type { HttpOutcome, SignedPost } from '../delivery/http.ts';
import type { JobKind } from '../queue/engine.ts';
import { HTTP_SCHEDULES, nextHttpAttemptAt } from '../queue/retry-policy.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { JobsRepo } from '../store/jobs-repo.ts';
import type { EventRecord, JobRecord, WebhookRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import type { WebhooksRepo } from '../store/webhooks-repo.ts';
import { iso, type Clock } from '../util/time.ts';
import type { WebhookCounters } from './counters.ts';
import { envelope } from './payload.ts';

/** Consecutive failed attempts after which a webhook is disabled (reference-api §5.4). */
export const AUTO_DISABLE_AFTER = 100;
/** An origin found down is tried again after 1 s, doubling per probe that fails, at most 5 minutes. */
const DOWN_FIRST_MS = 1000;
const DOWN_MAX_MS = 300_000;
/** Held jobs moved back onto the due-time index per batch when a webhook is enabled again. */
const RELEASE_BATCH = 500;

export interface WebhookDeliveriesDeps {
  store: Store;
  jobs: JobsRepo;
  webhooks: WebhooksRepo;
  counters: WebhookCounters;
  /** Opens a webhook's sealed secret. */
  secretOf: (webhook: WebhookRecord) => string;
  /** Disables a webhook (false when it is gone or already disabled). */
  disable: (id: string) => Promise<boolean>;
  post: (post: SignedPost) => Promise<HttpOutcome>;
  clock: Clock;
  log: Logger;
  /** Tells the engine of a job due at `dueMs`. */
  notify: (dueMs: number) => void;
  /** Tells the engine to start nothing for a destination found down before `untilMs`. */
  pause: (destination: string, untilMs: number) => void;
  /** Tells the engine the destination answers again. */
  unpause: (destination: string) => void;
  random?: () => number;
  /**
   * Wall-clock time for `webhook-timestamp`: receivers check it against their own clock (±5
   * minutes), so it is the machine's time even where scheduling runs on an injected clock.
   */
  wallClock?: () => number;
}

/**
 * Webhook deliveries as a job kind of the engine: the HTTP dispatcher, destinations by URL
 * origin, and the outcome rules. A 2xx ends the job; anything else is a failed attempt, retried
 * after n⁴ s ±10 %, 6 attempts in all, then the job is failed and kept. Each attempt counts on
 * the webhook in its outcome batch; 100 failures in a row disable the webhook, whose jobs are
 * then held until it is enabled again.
 */
export class WebhookDeliveries implements JobKind<JobRecord> {
  readonly name = 'webhook' as const;
  readonly dispatcher = 'http' as const;
  private readonly secrets = new Map<string, string>();
  /** Origins that answered nothing: consecutive probes failed, and when to probe next. */
  private readonly down = new Map<string, { probes: number; until: number }>();

  constructor(private readonly d: WebhookDeliveriesDeps) {}

  async load(id: string): Promise<JobRecord | null> {
    const job = await this.d.jobs.get(id);
    return job && job.state === 'pending' ? job : null;
  }

  dueMs(job: JobRecord): number {
    return Date.parse(job.dueAt);
  }

  async destination(job: JobRecord): Promise<string> {
    const webhook = await this.d.webhooks.get(job.targetId);
    if (!webhook) return 'webhook-deleted';
    return originOf(webhook.url);
  }

  async run(job: JobRecord, release: () => void): Promise<void> {
    const log = this.d.log.child({ job_id: job.id, webhook_id: job.targetId, account_id: job.accountId });
    const webhook = await this.d.webhooks.get(job.targetId);
    if (!webhook) {
      release();
      await this.d.store.commit(this.d.jobs.change(job, null));
      log.info('webhook deleted: its pending delivery is dropped');
      return;
    }
    if (!webhook.enabled) {
      release();
      await this.d.store.commit(this.d.jobs.change(job, { ...job, state: 'held', updatedAt: iso(this.d.clock.now()) }));
      log.debug('webhook disabled: delivery held until it is enabled');
      return;
    }
    const event = await this.d.store.get<EventRecord>('events', job.eventId);
    if (!event) {
      release();
      await this.d.store.commit(this.d.jobs.change(job, null));
      log.warn({ event_id: job.eventId }, 'the event of a pending webhook delivery is gone (retention): dropped');
      return;
    }
    const outcome = await this.d.post({
      url: webhook.url,
      body: envelope(event, webhook.id),
      id: job.id,
      timestampSeconds: Math.floor((this.d.wallClock ?? Date.now)() / 1000),
      secret: this.secretOf(webhook),
    });
    release();
    await this.settle(job, webhook, outcome, log);
  }

  /** Parks due jobs of an origin that is down: off the index, listed under the origin. */
  async setAside(jobs: JobRecord[], destination: string): Promise<void> {
    const at = iso(this.d.clock.now());
    await this.d.store.commit(jobs.flatMap((job) => this.d.jobs.change(job, { ...job, state: 'parked', parkedOn: destination, updatedAt: at })));
  }

  /**
   * After a restart nothing is known to be down: one parked job of each origin goes back on the
   * index as a probe; when it gets an answer, the others follow.
   */
  async probeParked(): Promise<number> {
    let probes = 0;
    for await (const { destination, first } of this.d.jobs.parkedDestinations()) {
      const job = await this.d.jobs.get(first);
      if (job?.state !== 'parked') continue;
      this.down.set(destination, { probes: 0, until: 0 });
      await this.unpark([job]);
      probes += 1;
    }
    return probes;
  }

  /** Moves the jobs parked for an origin back onto the index, due now. */
  private async releaseParked(origin: string): Promise<number> {
    let moved = 0;
    for (;;) {
      const ids = await this.d.jobs.parkedOn(origin, RELEASE_BATCH);
      if (ids.length === 0) break;
      const jobs = (await Promise.all(ids.map((id) => this.d.jobs.get(id)))).filter((j): j is JobRecord => j?.state === 'parked');
      if (jobs.length === 0) break;
      await this.unpark(jobs);
      moved += jobs.length;
    }
    if (moved > 0) this.d.log.info({ destination: origin, jobs: moved }, 'webhook endpoint answers again: parked deliveries resume');
    return moved;
  }

  private async unpark(jobs: JobRecord[]): Promise<void> {
    const now = this.d.clock.now();
    await this.d.store.commit(jobs.flatMap((job) => this.d.jobs.change(job, { ...job, state: 'pending', parkedOn: undefined, dueAt: iso(now), updatedAt: iso(now) })));
    this.d.notify(now);
  }

  /** Moves the jobs held for a webhook back onto the due-time index, due now. */
  async release(webhookId: string): Promise<number> {
    let moved = 0;
    for (;;) {
      const ids = await this.d.jobs.heldFor(webhookId, RELEASE_BATCH);
      if (ids.length === 0) break;
      const now = this.d.clock.now();
      const ops: WriteOp[] = [];
      for (const job of await Promise.all(ids.map((id) => this.d.jobs.get(id)))) {
        if (job?.state === 'held') ops.push(...this.d.jobs.change(job, { ...job, state: 'pending', dueAt: iso(now), updatedAt: iso(now) }));
      }
      if (ops.length === 0) break;
      await this.d.store.commit(ops);
      moved += ids.length;
      this.d.notify(now);
    }
    if (moved > 0) this.d.log.info({ webhook_id: webhookId, jobs: moved }, 'webhook enabled again: held deliveries resume');
    return moved;
  }

  /**
   * The attempt's one batch: the job's new state and due entry, and the webhook's counters.
   * When the origin answered nothing at all (refused, reset, timed out, unresolvable) the
   * attempt counts on the webhook but not against the job: the origin is paused and probed,
   * and its deliveries wait for it instead of using up their attempts, so an outage of hours
   * loses nothing (100 failures in a row still disable the webhook).
   */
  private async settle(job: JobRecord, webhook: WebhookRecord, outcome: HttpOutcome, log: Logger): Promise<void> {
    const now = this.d.clock.now();
    const at = iso(now);
    const lastAttempt = { at, status: outcome.status ?? 0, error: outcome.error, durationMs: outcome.durationMs };
    const origin = originOf(webhook.url);
    let next: JobRecord | null = null;
    if (outcome.unreachable) {
      const until = this.markDown(origin, now);
      next = { ...job, dueAt: iso(until), updatedAt: at, lastAttempt };
      this.d.pause(origin, until);
    } else if (this.down.delete(origin)) {
      // It answers again: what waited for it follows.
      this.d.unpause(origin);
      void this.releaseParked(origin).catch((err: unknown) => log.error({ err, destination: origin }, 'could not resume parked webhook deliveries'));
    }
    if (!outcome.ok && next === null) {
      const attempts = job.attempts + 1;
      const due = nextHttpAttemptAt(attempts, now, HTTP_SCHEDULES.webhook, this.d.random);
      next = due === null
        ? { ...job, state: 'failed', attempts, updatedAt: at, lastAttempt }
        : { ...job, state: 'pending', attempts, dueAt: iso(due), updatedAt: at, lastAttempt };
    }
    const { counts, op } = await this.d.counters.count(webhook.id, outcome.ok, at);
    await this.d.store.commit([...this.d.jobs.change(job, next), op]);
    if (outcome.ok) {
      log.debug({ status: outcome.status, duration_ms: outcome.durationMs }, 'webhook delivered');
      return;
    }
    log.info(
      { status: outcome.status, error: outcome.error, attempts: next!.attempts, next_attempt_at: next!.state === 'pending' ? next!.dueAt : undefined },
      next!.state === 'failed' ? 'webhook delivery failed for good' : outcome.unreachable ? 'webhook endpoint not answering; deliveries wait' : 'webhook delivery failed; will retry',
    );
    if (next!.state === 'pending') this.d.notify(Date.parse(next!.dueAt));
    if (counts.errorsSinceLastSuccess >= AUTO_DISABLE_AFTER && (await this.d.disable(webhook.id))) {
      log.warn({ errors_since_last_success: counts.errorsSinceLastSuccess, url: webhook.url }, `webhook disabled after ${AUTO_DISABLE_AFTER} failed deliveries in a row; enable it again through the API to resume`);
    }
  }

  /** When to probe a down origin next; attempts already under way when it went down add no probe. */
  private markDown(origin: string, now: number): number {
    const known = this.down.get(origin);
    if (known && known.until > now) return known.until;
    const probes = (known?.probes ?? 0) + 1;
    const delay = Math.min(DOWN_FIRST_MS * 2 ** (probes - 1), DOWN_MAX_MS);
    const until = now + Math.round(delay * (1 + 0.1 * (2 * (this.d.random ?? Math.random)() - 1)));
    this.down.set(origin, { probes, until });
    if (this.down.size > 10_000) this.down.delete(this.down.keys().next().value!);
    return until;
  }

  private secretOf(webhook: WebhookRecord): string {
    let secret = this.secrets.get(webhook.secret);
    if (secret === undefined) {
      secret = this.d.secretOf(webhook);
      if (this.secrets.size > 10_000) this.secrets.clear();
      this.secrets.set(webhook.secret, secret);
    }
    return secret;
  }
}

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'invalid-url';
  }
}
