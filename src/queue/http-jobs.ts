import type { Logger } from 'pino';
import type { HttpOutcome, PostBody, SignedPost } from '../delivery/http.ts';
import type { JobKind } from './engine.ts';
import { nextHttpAttemptAt, type HttpSchedule } from './retry-policy.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { JobsRepo } from '../store/jobs-repo.ts';
import type { JobRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { Lru } from '../util/lru.ts';
import { iso, type Clock } from '../util/time.ts';
import { urlOrigin } from '../util/url-origin.ts';
import type { AttemptLog } from './attempt-log.ts';
import { OutcomeWriter } from './outcome-writer.ts';

/** Consecutive failed attempts after which a target or route is disabled (reference-api §5.4). */
export const AUTO_DISABLE_AFTER = 100;
/** An origin found down is tried again after 1 s, doubling per probe that fails, at most 5 minutes. */
const DOWN_FIRST_MS = 1000;
const DOWN_MAX_MS = 300_000;
/** Origins found down, and target secrets in clear, kept at most (then the least recently used go). */
const ORIGINS_KEPT = 10_000;
const SECRETS_KEPT = 10_000;
/** Held jobs moved back onto the due-time index per batch when a target is enabled again. */
const RELEASE_BATCH = 500;

/**
 * How an attempt at a job ended: delivered (2xx); retry (refused, tried again later); failed (the
 * last attempt); unreachable (the endpoint answered nothing, the job waits for it); held (its
 * target is disabled); dropped (its target, or what it was about, is gone).
 */
export type HttpJobOutcome = 'delivered' | 'retry' | 'failed' | 'unreachable' | 'held' | 'dropped';

/** What an HTTP job is sent to: a target or a route, as the kind sees it. */
export interface HttpTarget {
  id: string;
  url: string;
  enabled: boolean;
  /** Sealed; `HttpTargets.secretOf` opens it. */
  secret: string;
}

/** A target's delivery counters (queue/target-counters.ts). */
export interface TargetCounters {
  count(targetId: string, ok: boolean, at: string): Promise<{ counts: { errorsSinceLastSuccess: number }; op: WriteOp }>;
}

/** What one HTTP job kind brings: its targets, its request bodies, its schedule and counters. */
export interface HttpTargets {
  kind: 'webhook' | 'route';
  /** Build the body when the job is read into memory (small bodies), not when it is sent. */
  prefetchBody: boolean;
  /** The bodies of jobs read together (with prefetchBody): what they need read at once. */
  bodies?(items: ReadonlyArray<{ job: JobRecord; target: HttpTarget }>): Promise<Array<string | null>>;
  schedule: HttpSchedule;
  get(id: string): Promise<HttpTarget | undefined>;
  /** The request body of the job, or null when what it was about is gone (the job is dropped). */
  body(job: JobRecord, target: HttpTarget): Promise<PostBody | null>;
  secretOf(target: HttpTarget): string;
  counters: TargetCounters;
  /** Disables the target (false when it is gone or already disabled). */
  disable(id: string): Promise<boolean>;
}

export interface HttpJobsDeps {
  store: Store;
  jobs: JobsRepo;
  targets: HttpTargets;
  post: (post: SignedPost) => Promise<HttpOutcome>;
  clock: Clock;
  log: Logger;
  /** Tells the engine of a job due at `dueMs`. */
  notify: (dueMs: number) => void;
  /** Writes outcomes again while the store refuses them (shared, so that a stop gives them all up). */
  writer?: OutcomeWriter;
  /** Tells the engine to start nothing for a destination found down before `untilMs`. */
  pause: (destination: string, untilMs: number) => void;
  /** Tells the engine the destination answers again. */
  unpause: (destination: string) => void;
  random?: () => number;
  /** Jobs handed to the client at once per origin, as a multiple of its connections (JobKind.handOff; default 1). */
  handOff?: number;
  /** Withdraws the posts to an origin that wait in the client for a connection (with handOff). */
  withdraw?: (origin: string) => void;
  /** Origins found down, shared by every HTTP kind: a webhook and a route may share an origin. */
  down?: DownOrigins;
  /**
   * Wall-clock time for `webhook-timestamp`: receivers check it against their own clock (±5
   * minutes), so it is the machine's time even where scheduling runs on an injected clock.
   */
  wallClock?: () => number;
  /** Told how each attempt ended, once its batch is written (metrics); must not throw. */
  observe?: (kind: 'webhook' | 'route', outcome: HttpJobOutcome) => void;
  /** Where each request made is noted once its outcome is written (the dashboard's recent deliveries). */
  attempts?: AttemptLog;
}

/**
 * An HTTP job kind of the engine (target deliveries, route POSTs): the HTTP dispatcher,
 * destinations by URL origin, and the outcome rules. A 2xx ends the job; anything else is a
 * failed attempt, retried after n⁴ s ±10 % up to the kind's number of attempts, then the job is
 * failed and kept. Each attempt counts on the target in its outcome batch; 100 failures in a row
 * disable the target, whose jobs are then held until it is enabled again.
 */
/** A job as the engine holds it: its record, its target and (webhooks) its body, read ahead. */
export interface PreparedJob {
  job: JobRecord;
  target: HttpTarget | undefined;
  /** undefined: built when the request is made (large bodies: route payloads). */
  body: PostBody | null | undefined;
}

export class HttpJobs implements JobKind<PreparedJob> {
  readonly name: 'webhook' | 'route';
  readonly dispatcher = 'http' as const;
  readonly handOff: number | undefined;
  private readonly secrets = new Lru<string, string>(SECRETS_KEPT);
  /** Origins that answered nothing: consecutive probes failed, and when to probe next (shared by the HTTP kinds). */
  private readonly down: DownOrigins;

  private readonly writer: OutcomeWriter;

  constructor(private readonly d: HttpJobsDeps) {
    this.name = d.targets.kind;
    this.handOff = d.handOff;
    this.down = d.down ?? downOrigins();
    this.writer = d.writer ?? new OutcomeWriter();
  }

  /**
   * The job with its target and, for small bodies (webhooks), the request body: read while the
   * job waits in the ready queue, so a slot of the origin is held only for the request itself.
   */
  async load(id: string, key: string): Promise<PreparedJob | null> {
    return (await this.loadMany([id], [key]))[0]!;
  }

  /**
   * Jobs taken together: their records in one read (their bodies are read by prepare), from
   * their due-time entries (`keys`) when they are kept there.
   */
  async loadMany(ids: readonly string[], keys: readonly string[]): Promise<Array<PreparedJob | null>> {
    const records = await this.d.jobs.getMany(ids, keys);
    return Promise.all(
      records.map(async (job): Promise<PreparedJob | null> => {
        if (!job || job.state !== 'pending') return null;
        return { job, target: await this.d.targets.get(job.targetId), body: undefined };
      }),
    );
  }

  /** The bodies of jobs going into a ready queue (small bodies: webhooks), their events in one read. */
  async prepare(prepared: PreparedJob[]): Promise<void> {
    this.d.jobs.taken(prepared.map((p) => p.job.id));
    if (!this.d.targets.prefetchBody) return;
    const wanted = prepared.filter((p): p is PreparedJob & { target: HttpTarget } => p.target?.enabled === true);
    const bodies = this.d.targets.bodies
      ? await this.d.targets.bodies(wanted.map(({ job, target }) => ({ job, target })))
      : await Promise.all(wanted.map(({ job, target }) => this.d.targets.body(job, target)));
    for (const [i, p] of wanted.entries()) p.body = bodies[i]!;
  }

  dueMs(p: PreparedJob): number {
    return Date.parse(p.job.dueAt);
  }

  async destination(p: PreparedJob): Promise<string> {
    return p.target ? originOf(p.target.url) : `${this.name}-deleted`;
  }

  /** The posts handed to the client for the destination and not sent yet come back, not attempted. */
  withdraw(destination: string): void {
    this.d.withdraw?.(destination);
  }

  /**
   * A target stopped taking deliveries at `url` (disabled, deleted, moved): what waits in the
   * client for its origin comes back and is read again, to be held, dropped or sent anew. (Other
   * targets' posts to the origin come back too, and are simply sent again.)
   */
  stopped(url: string): void {
    this.withdraw(originOf(url));
  }

  async run(p: PreparedJob, release: () => void): Promise<void | 'withdrawn'> {
    const job = p.job;
    // The job's logger is made only when something is logged: a delivery that succeeds logs at
    // debug, and making a child logger per request was about 1 % of the main thread.
    let child: Logger | undefined;
    const log = (): Logger => (child ??= this.d.log.child({ job_id: job.id, kind: this.name, [`${this.name}_id`]: job.targetId, account_id: job.accountId }));
    // Read again (from the store's cache): it may have been disabled or deleted since.
    const target = await this.d.targets.get(job.targetId);
    if (!target) {
      release();
      await this.d.store.commit(this.d.jobs.change(job, null));
      this.d.observe?.(this.name, 'dropped');
      log().info(`${this.name} deleted: its pending delivery is dropped`);
      return;
    }
    if (!target.enabled) {
      release();
      await this.d.store.commit(this.d.jobs.change(job, { ...job, state: 'held', updatedAt: iso(this.d.clock.now()) }));
      this.d.observe?.(this.name, 'held');
      log().debug(`${this.name} disabled: delivery held until it is enabled`);
      return;
    }
    const body = p.body !== undefined && p.target?.url === target.url ? p.body : await this.d.targets.body(job, target);
    if (body === null) {
      release();
      await this.d.store.commit(this.d.jobs.change(job, null));
      this.d.observe?.(this.name, 'dropped');
      log().warn({ event_id: job.eventId }, `what a pending ${this.name} delivery was about is gone (retention): dropped`);
      return;
    }
    const outcome = await this.d.post({
      url: target.url,
      body,
      id: job.id,
      timestampSeconds: Math.floor((this.d.wallClock ?? Date.now)() / 1000),
      secret: this.secretOf(target),
    });
    release();
    // Withdrawn before it was sent (its origin suspended or found down, its target stopped):
    // not an attempt; the job is read again from the index.
    if (outcome.withdrawn) return 'withdrawn';
    await this.settle(job, target, outcome, log);
  }

  /** Parks due jobs of an origin that is down: off the index, listed under the origin. */
  async setAside(prepared: PreparedJob[], destination: string): Promise<void> {
    const at = iso(this.d.clock.now());
    await this.d.store.commit(prepared.flatMap(({ job }) => this.d.jobs.change(job, { ...job, state: 'parked', parkedOn: destination, updatedAt: at })));
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
    if (moved > 0) this.d.log.info({ destination: origin, jobs: moved }, `${this.name} endpoint answers again: parked deliveries resume`);
    return moved;
  }

  private async unpark(jobs: JobRecord[]): Promise<void> {
    const now = this.d.clock.now();
    await this.d.store.commit(
      jobs.flatMap((job) => this.d.jobs.change(job, { ...job, state: 'pending', parkedOn: undefined, dueAt: iso(now), updatedAt: iso(now) })),
    );
    this.d.notify(now);
  }

  /** Moves the jobs held for a target (or route) back onto the due-time index, due now. */
  async release(targetId: string): Promise<number> {
    let moved = 0;
    for (;;) {
      const ids = await this.d.jobs.heldFor(targetId, RELEASE_BATCH);
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
    if (moved > 0) this.d.log.info({ [`${this.name}_id`]: targetId, jobs: moved }, `${this.name} enabled again: held deliveries resume`);
    return moved;
  }

  /**
   * The attempt's one batch: the job's new state and due entry, and the target's counters.
   * When the origin answered nothing at all (refused, reset, timed out, unresolvable) the
   * attempt counts on the target but not against the job: the origin is paused and probed,
   * and its deliveries wait for it instead of using up their attempts, so an outage of hours
   * loses nothing (100 failures in a row still disable the target).
   */
  private async settle(job: JobRecord, target: HttpTarget, outcome: HttpOutcome, log: () => Logger): Promise<void> {
    const now = this.d.clock.now();
    const at = iso(now);
    const lastAttempt = { at, status: outcome.status ?? 0, error: outcome.error, durationMs: outcome.durationMs };
    const origin = originOf(target.url);
    let next: JobRecord | null = null;
    if (outcome.unreachable) {
      const until = this.markDown(origin, now);
      next = { ...job, dueAt: iso(until), updatedAt: at, lastAttempt };
      this.d.pause(origin, until);
    } else if (this.down.delete(origin)) {
      // It answers again: what waited for it follows.
      this.d.unpause(origin);
      void this.releaseParked(origin).catch((err: unknown) => log().error({ err, destination: origin }, 'could not resume parked target deliveries'));
    }
    if (!outcome.ok && next === null) {
      const attempts = job.attempts + 1;
      const due = nextHttpAttemptAt(attempts, now, this.d.targets.schedule, this.d.random);
      next =
        due === null
          ? { ...job, state: 'failed', attempts, updatedAt: at, lastAttempt }
          : { ...job, state: 'pending', attempts, dueAt: iso(due), updatedAt: at, lastAttempt };
    }
    const { counts, op } = await this.d.targets.counters.count(target.id, outcome.ok, at);
    const ops = [...this.d.jobs.change(job, next), op];
    // The request was made: its outcome is written however long the store refuses it, never attempted again meanwhile.
    await this.writer.write(() => this.d.store.commit(ops), log, { status: outcome.status ?? 0 });
    const result = outcome.ok ? 'delivered' : outcome.unreachable ? 'unreachable' : next!.state === 'failed' ? 'failed' : 'retry';
    this.d.observe?.(this.name, result);
    this.d.attempts?.record({
      job_id: job.id,
      kind: this.name,
      target_id: target.id,
      account_id: job.accountId,
      event_id: job.eventId,
      at,
      status: outcome.status ?? null,
      response_ms: outcome.durationMs,
      error: outcome.error,
      outcome: result,
      attempts: next?.attempts ?? job.attempts,
    });
    if (outcome.ok) {
      if (this.d.log.isLevelEnabled('debug')) log().debug({ status: outcome.status, duration_ms: outcome.durationMs }, `${this.name} delivered`);
      return;
    }
    log().info(
      { status: outcome.status, error: outcome.error, attempts: next!.attempts, next_attempt_at: next!.state === 'pending' ? next!.dueAt : undefined },
      next!.state === 'failed'
        ? `${this.name} delivery failed for good`
        : outcome.unreachable
          ? `${this.name} endpoint not answering; deliveries wait`
          : `${this.name} delivery failed; will retry`,
    );
    if (next!.state === 'pending') this.d.notify(Date.parse(next!.dueAt));
    if (counts.errorsSinceLastSuccess >= AUTO_DISABLE_AFTER && (await this.d.targets.disable(target.id))) {
      log().warn(
        { errors_since_last_success: counts.errorsSinceLastSuccess, url: target.url },
        `${this.name} disabled after ${AUTO_DISABLE_AFTER} failed deliveries in a row; enable it again through the API to resume`,
      );
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
    return until;
  }

  private secretOf(target: HttpTarget): string {
    let secret = this.secrets.get(target.secret);
    if (secret === undefined) {
      secret = this.d.targets.secretOf(target);
      this.secrets.set(target.secret, secret);
    }
    return secret;
  }
}

/** Origins that answered nothing: consecutive probes failed, and when to probe next. */
export type DownOrigins = Lru<string, { probes: number; until: number }>;

/** A record of origins found down, for the HTTP kinds to share (HttpJobsDeps.down). */
export function downOrigins(): DownOrigins {
  return new Lru(ORIGINS_KEPT);
}

function originOf(url: string): string {
  return urlOrigin(url) ?? 'invalid-url';
}
