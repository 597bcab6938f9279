import type { EventRecorder } from '../events/recorder.ts';
import type { Logger } from '../logging/logger.ts';
import type { Messages } from '../message/messages.ts';
import { isFinal } from '../message/retention.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageRecord } from '../store/records.ts';
import type { JobEngine, QueueSnapshot } from '../queue/engine.ts';
import { purgedByOperator } from '../queue/outcomes.ts';
import { splitLane } from '../queue/lane.ts';
import { resolveDestination, type DeliveryRouting, type ResolvedDestination } from '../queue/destination-name.ts';
import type { DueEntry, JobIndex } from '../store/job-index.ts';
import type { JobsRepo } from '../store/jobs-repo.ts';
import type { MetaRepo } from '../store/meta.ts';
import type { JobRecord } from '../store/records.ts';
import { mapLimited } from '../util/limited.ts';
import { isValidDomain, normalizeDomain } from '../util/domain-name.ts';
import { domainOf } from '../util/email.ts';
import { badRequest, notFound } from '../util/errors.ts';
import { isUuid } from '../util/ids.ts';
import { iso, type Clock } from '../util/time.ts';
import { urlOrigin } from '../util/url-origin.ts';
import {
  QUEUE_STATES,
  type DestinationFigures,
  type ListQuery,
  type NotQueued,
  type PurgeResult,
  type QueuedMessage,
  type QueueList,
  type QueueOperations,
  type QueueState,
  type QueueStatus,
  type RetryResult,
  type Selection,
  type JobFigures,
  type SuspendResult,
} from './protocol.ts';

/** What the operator's view needs of a running scheduler. */
export interface QueueScheduler {
  snapshot(): QueueSnapshot;
  wake(): Promise<void>;
  holds(id: string): boolean;
}

export interface QueueAdminOptions {
  messages: Messages;
  repo: MessagesRepo;
  events: EventRecorder;
  clock: Clock;
  /** The daemon's log: one line per message changed. */
  log?: Logger;
  /** The engine's HTTP jobs and the operator's suspensions; absent, status shows mail only (metrics). */
  jobs?: { index: JobIndex; repo: JobsRepo; meta: MetaRepo; targetUrl: (kind: JobRecord['kind'], id: string) => Promise<string | undefined> };
  /** Where mail goes (transport, smarthost, MX sets): what `queue suspend <name>` resolves a name by. */
  routing?: DeliveryRouting;
  /** null: the store is open without a daemon (the CLI's direct path). */
  daemon: {
    delivery: { scheduler: QueueScheduler; limits: { concurrency: number; perDestination: number; readyLimit: number } } | null;
    engine?: JobEngine | null;
  } | null;
}

const DEFAULT_LIMIT = 100;
/** Records read from the store at once while walking the due-time index. */
const READ_CHUNK = 256;
/** Message updates in flight at once: their batches share synced commits. */
const PARALLEL_UPDATES = 16;

interface Queued {
  message: MessageRecord;
  state: QueueState;
}

/**
 * The queue as the operator sees and changes it, over the store's due-time index. Changes go
 * through `Messages.update` (the message's lock, one batch per message), like the delivery
 * engine's own outcomes, so they never race an attempt's result.
 */
export class QueueAdmin implements QueueOperations {
  constructor(private readonly o: QueueAdminOptions) {}

  async status(): Promise<QueueStatus> {
    const now = this.o.clock.now();
    const totals = { queued: 0, due: 0, deferred: 0, scheduled: 0, held: 0 };
    const byDestination = new Map<string, DestinationFigures>();
    for await (const { message, state } of this.queued(now)) {
      const destination = domainOf(message.recipient);
      let figures = byDestination.get(destination);
      if (!figures) {
        figures = { destination, queued: 0, due: 0, deferred: 0, scheduled: 0, held: 0, oldest_created_at: message.createdAt, next_attempt_at: message.dueAt };
        byDestination.set(destination, figures);
      }
      totals.queued += 1;
      totals[state] += 1;
      figures.queued += 1;
      figures[state] += 1;
      if (message.createdAt < figures.oldest_created_at) figures.oldest_created_at = message.createdAt;
      if (message.dueAt < figures.next_attempt_at) figures.next_attempt_at = message.dueAt;
    }
    const destinations = [...byDestination.values()].sort((a, b) => b.queued - a.queued || a.destination.localeCompare(b.destination));
    const suspended = this.o.jobs ? [...(await this.o.jobs.meta.suspended())].map(([destination, s]) => ({ destination, since: s.since })) : [];
    return { generated_at: iso(now), daemon: this.daemonFigures(), totals, destinations, jobs: await this.jobFigures(now), suspended };
  }

  /** Suspends the engine destination the name stands for (see queue/destination-name.ts), not the name as given. */
  async suspend(name: string): Promise<SuspendResult> {
    const jobs = this.requireJobs();
    const suspended = await jobs.meta.suspended();
    const { destination, via } = await this.resolve(name, suspended);
    const changed = !suspended.has(destination);
    if (changed) await jobs.meta.suspend(destination, iso(this.o.clock.now()), 'operator');
    this.o.daemon?.engine?.suspend(destination);
    this.o.log?.info({ destination, name: name.trim().toLowerCase(), via, changed }, 'destination suspended by operator');
    return { destination, name: name.trim().toLowerCase(), via, suspended: true, changed };
  }

  /** Resumes a suspended destination named as it is, else the destination the name stands for. */
  async resume(name: string): Promise<SuspendResult> {
    const jobs = this.requireJobs();
    const suspended = await jobs.meta.suspended();
    const exact = name.trim().toLowerCase();
    const { destination, via } = suspended.has(exact) ? { destination: exact, via: 'destination' as const } : await this.resolve(name, suspended);
    const changed = suspended.has(destination);
    if (changed) await jobs.meta.resume(destination);
    this.o.daemon?.engine?.resume(destination);
    this.o.log?.info({ destination, name: exact, via, changed }, 'destination resumed by operator');
    return { destination, name: exact, via, suspended: false, changed };
  }

  /** What the engine files the name's jobs under. */
  private resolve(name: string, suspended: ReadonlyMap<string, unknown>): Promise<ResolvedDestination> {
    const routing = this.o.routing;
    if (!routing) throw new Error('queue admin built without the delivery routing');
    const engine = this.o.daemon?.engine ?? null;
    // A destination whose mail is filed under lanes (source/destination) is known by its lanes.
    const inMemory = new Set((engine?.destinations() ?? []).flatMap((d) => [d.destination, splitLane(d.destination).destination]));
    const configured = new Set(routing.configured);
    return resolveDestination(name, {
      transport: routing.transport,
      smarthost: routing.smarthost,
      known: (n) => inMemory.has(n) || configured.has(n) || suspended.has(n),
      mxSet: (domain) => routing.mxSet(domain),
    });
  }

  private requireJobs(): NonNullable<QueueAdminOptions['jobs']> {
    if (!this.o.jobs) throw new Error('queue admin built without the job store');
    return this.o.jobs;
  }

  /** Stored HTTP jobs by kind and URL origin: pending ones from the index, held and failed from their listings. */
  private async jobFigures(now: number): Promise<JobFigures[]> {
    if (!this.o.jobs) return [];
    const { index, repo, targetUrl } = this.o.jobs;
    const figures = new Map<string, JobFigures>();
    const origins = new Map<string, string>();
    const originOf = async (job: JobRecord): Promise<string> => {
      let origin = origins.get(job.targetId);
      if (origin === undefined) {
        const url = await targetUrl(job.kind, job.targetId);
        origin = url ? (urlOrigin(url) ?? 'invalid-url') : `${job.kind}-deleted`;
        origins.set(job.targetId, origin);
      }
      return origin;
    };
    const count = async (jobs: ReadonlyArray<JobRecord | undefined>): Promise<void> => {
      for (const job of jobs) {
        if (!job) continue;
        const destination = await originOf(job);
        const key = `${job.kind} ${destination}`;
        let f = figures.get(key);
        if (!f) {
          f = { kind: job.kind, destination, pending: 0, due: 0, held: 0, parked: 0, failed: 0, next_attempt_at: null };
          figures.set(key, f);
        }
        if (job.state === 'pending') {
          f.pending += 1;
          if (Date.parse(job.dueAt) <= now) f.due += 1;
          if (f.next_attempt_at === null || job.dueAt < f.next_attempt_at) f.next_attempt_at = job.dueAt;
        } else if (job.state === 'held') f.held += 1;
        else if (job.state === 'parked') f.parked += 1;
        else if (job.state === 'failed') f.failed += 1;
      }
    };
    for (const kind of ['webhook', 'route'] as const) {
      let chunk: DueEntry[] = [];
      for await (const entry of index.entries(kind)) {
        chunk.push(entry);
        if (chunk.length === READ_CHUNK) {
          await count(await repo.pending(chunk));
          chunk = [];
        }
      }
      await count(await repo.pending(chunk));
    }
    let chunk: string[] = [];
    for await (const id of repo.parked()) {
      chunk.push(id);
      if (chunk.length === READ_CHUNK) {
        await count(await repo.getMany(chunk));
        chunk = [];
      }
    }
    await count(await repo.getMany(chunk));
    const total = (f: JobFigures) => f.pending + f.held + f.parked + f.failed;
    return [...figures.values()].sort((a, b) => total(b) - total(a) || a.destination.localeCompare(b.destination));
  }

  async list(query: ListQuery): Promise<QueueList> {
    const domain = query.domain === undefined ? undefined : domainName(query.domain);
    const account = query.account === undefined ? undefined : uuid(query.account, 'account');
    const state = query.state === undefined ? undefined : queueState(query.state);
    const limit = query.limit ?? DEFAULT_LIMIT;
    if (!Number.isInteger(limit) || limit < 1) throw badRequest(`--limit must be a whole number of at least 1, not ${query.limit}`);
    const now = this.o.clock.now();
    const messages: QueuedMessage[] = [];
    let more = 0;
    for await (const queued of this.queued(now)) {
      const m = queued.message;
      if (domain !== undefined && domainOf(m.recipient) !== domain) continue;
      if (account !== undefined && m.accountId !== account) continue;
      if (state !== undefined && queued.state !== state) continue;
      if (messages.length < limit) messages.push(present(queued));
      else more += 1;
    }
    return { generated_at: iso(now), messages, more };
  }

  /**
   * Makes the selected messages due now. Messages held for a first_attempt their sender asked
   * for are only moved when named by id; a domain, account or --all retry is for deferred mail.
   */
  async retry(selection: Selection): Promise<RetryResult> {
    const { ids, named } = await this.select(selection);
    const result: RetryResult = { retried: 0, ids: [], already_due: 0, kept_scheduled: 0, held: 0, not_queued: [] };
    await eachLimited(ids, async (id) => {
      // Set by the change below; a message deleted meanwhile (retention) is not queued any more.
      let verdict = { id, status: 'deleted' } as 'retried' | 'already_due' | 'kept_scheduled' | 'held' | NotQueued;
      const changed = await this.o.messages.update(id, (current, now) => {
        if (isFinal(current.status)) {
          verdict = { id, status: current.status };
          return null;
        }
        if (current.heldAt) {
          // Its account is not active: it goes when the account does (accounts unsuspend).
          verdict = 'held';
          return null;
        }
        if (Date.parse(current.dueAt) <= now) {
          verdict = 'already_due';
          return null;
        }
        if (!named && current.status !== 'Deferred') {
          verdict = 'kept_scheduled';
          return null;
        }
        verdict = 'retried';
        const next: MessageRecord = { ...current, dueAt: iso(now), updatedAt: iso(now) };
        return { next, extra: [...this.o.repo.unschedule(current), ...this.o.repo.schedule(next)] };
      });
      if (verdict === 'retried') {
        this.logChange(changed, 'message retried by operator');
        result.retried += 1;
        result.ids.push(id);
      } else if (verdict === 'already_due') result.already_due += 1;
      else if (verdict === 'kept_scheduled') result.kept_scheduled += 1;
      else if (verdict === 'held') result.held += 1;
      else if (named) result.not_queued.push(verdict);
    });
    if (result.retried > 0) await this.o.daemon?.delivery?.scheduler.wake();
    return result;
  }

  /**
   * Takes the selected messages off the queue for good: each becomes Failed with a "purged by
   * operator" attempt line and a message.failed event, in one batch. The records stay, readable
   * through the API, until retention removes them. A message the scheduler holds (ready or in
   * flight) is left alone: its attempt may already be on the wire.
   */
  async purge(selection: Selection): Promise<PurgeResult> {
    const { ids, named } = await this.select(selection);
    const scheduler = this.o.daemon?.delivery?.scheduler ?? null;
    const result: PurgeResult = { purged: 0, ids: [], in_delivery: 0, not_queued: [] };
    await eachLimited(ids, async (id) => {
      let verdict = { id, status: 'deleted' } as 'purged' | 'in_delivery' | NotQueued;
      const changed = await this.o.messages.update(id, (current, now) => {
        if (isFinal(current.status)) {
          verdict = { id, status: current.status };
          return null;
        }
        if (scheduler?.holds(id)) {
          verdict = 'in_delivery';
          return null;
        }
        verdict = 'purged';
        return purgedByOperator(current, now, this.o.repo, this.o.events);
      });
      if (verdict === 'purged') {
        this.logChange(changed, 'message purged by operator');
        result.purged += 1;
        result.ids.push(id);
      } else if (verdict === 'in_delivery') result.in_delivery += 1;
      else if (named) result.not_queued.push(verdict);
    });
    return result;
  }

  /** The ids a retry or purge acts on; named ids must all exist, or nothing is done. */
  private async select(selection: Selection): Promise<{ ids: string[]; named: boolean }> {
    const ids = selection.ids ?? [];
    const filtered = selection.domain !== undefined || selection.account !== undefined;
    const kinds = [ids.length > 0, filtered, selection.all === true].filter(Boolean).length;
    if (kinds === 0) throw badRequest('say which messages: message ids, --domain and/or --account, or --all');
    if (kinds > 1) throw badRequest('give message ids, or --domain and/or --account, or --all: not several of these');

    if (ids.length > 0) {
      const wanted = [...new Set(ids.map((id) => uuid(id, 'message')))];
      const found = await this.o.repo.getMany(wanted);
      const unknown = wanted.filter((_, i) => found[i] === undefined);
      if (unknown.length > 0) throw notFound(`no such message: ${unknown.join(', ')}`);
      return { ids: wanted, named: true };
    }
    const domain = selection.domain === undefined ? undefined : domainName(selection.domain);
    const account = selection.account === undefined ? undefined : uuid(selection.account, 'account');
    const selected: string[] = [];
    for await (const { message } of this.queued(this.o.clock.now())) {
      if (domain !== undefined && domainOf(message.recipient) !== domain) continue;
      if (account !== undefined && message.accountId !== account) continue;
      selected.push(message.id);
    }
    return { ids: selected, named: false };
  }

  /** Queued messages in due order: the due-time index, each entry with its current record. */
  private async *queued(now: number): AsyncGenerator<Queued> {
    let chunk: Array<{ dueMs: number; id: string }> = [];
    for await (const entry of this.o.repo.scheduled()) {
      chunk.push(entry);
      if (chunk.length === READ_CHUNK) {
        yield* this.read(chunk, now);
        chunk = [];
      }
    }
    yield* this.read(chunk, now);
    // Then the mail held for accounts that are not active (off the index).
    let held: string[] = [];
    for await (const [, id] of this.o.repo.held()) {
      held.push(id);
      if (held.length === READ_CHUNK) {
        yield* this.readHeld(held);
        held = [];
      }
    }
    yield* this.readHeld(held);
  }

  private async *readHeld(ids: string[]): AsyncGenerator<Queued> {
    if (ids.length === 0) return;
    for (const message of await this.o.repo.getMany(ids)) {
      if (message?.heldAt && !isFinal(message.status)) yield { message, state: 'held' };
    }
  }

  private async *read(entries: Array<{ dueMs: number; id: string }>, now: number): AsyncGenerator<Queued> {
    if (entries.length === 0) return;
    const records = await this.o.repo.getMany(entries.map((e) => e.id));
    for (const [i, message] of records.entries()) {
      // An entry whose message is gone, final or due at another time is stale (the scheduler
      // drops it when it comes due): not part of the queue.
      if (!message || isFinal(message.status) || Date.parse(message.dueAt) !== entries[i]!.dueMs) continue;
      yield { message, state: stateOf(message, now) };
    }
  }

  private daemonFigures(): QueueStatus['daemon'] {
    if (!this.o.daemon) return null;
    const delivery = this.o.daemon.delivery;
    const engine = (this.o.daemon.engine?.destinations() ?? []).map(({ pausedUntil, ...d }) => ({
      ...d,
      paused_until: pausedUntil === null ? null : iso(pausedUntil),
    }));
    if (!delivery) return { delivery_enabled: false, scheduler: null, engine };
    const snap = delivery.scheduler.snapshot();
    return {
      delivery_enabled: true,
      engine,
      scheduler: {
        running: snap.running,
        ready: snap.ready,
        next_wake_at: snap.nextWakeAt === null ? null : iso(snap.nextWakeAt),
        limits: { concurrency: delivery.limits.concurrency, per_destination: delivery.limits.perDestination, ready_limit: delivery.limits.readyLimit },
        destinations: [...snap.destinations].sort((a, b) => a.destination.localeCompare(b.destination)),
      },
    };
  }

  private logChange(m: MessageRecord | null, what: string): void {
    if (m) this.o.log?.info({ message_id: m.id, account_id: m.accountId, recipient_domain: domainOf(m.recipient), status: m.status, due_at: m.dueAt }, what);
  }
}

function stateOf(m: MessageRecord, now: number): QueueState {
  if (Date.parse(m.dueAt) <= now) return 'due';
  return m.status === 'Deferred' ? 'deferred' : 'scheduled';
}

/** An attempt's TLS as the operator reads it: "TLSv1.3 mta-sts/enforce verified", "clear text opportunistic". */
export function tlsText(tls: NonNullable<MessageRecord['attempts'][number]['tls']>): string {
  const policy = tls.mode ? `${tls.policy}/${tls.mode}` : tls.policy;
  return `${tls.version ?? 'clear text'} ${policy} ${tls.verified ? 'verified' : 'unverified'}`;
}

function present({ message: m, state }: Queued): QueuedMessage {
  const last = m.attempts.at(-1);
  return {
    id: m.id,
    account_id: m.accountId,
    sender: m.sender,
    recipient: m.recipient,
    destination: domainOf(m.recipient),
    status: m.status,
    state,
    attempts: m.attempts.length,
    created_at: m.createdAt,
    next_attempt_at: m.dueAt,
    last_attempt: last
      ? {
          time: last.time,
          status: last.status,
          log: last.log,
          ...(last.tls ? { tls: tlsText(last.tls) } : {}),
          ...(last.source ? { source: last.source } : {}),
        }
      : null,
  };
}

function uuid(value: string, what: 'message' | 'account'): string {
  if (!isUuid(value)) throw badRequest(`"${value}" is not ${what === 'message' ? 'a message' : 'an account'} id (a UUID)`);
  return value.toLowerCase();
}

function domainName(value: string): string {
  const name = normalizeDomain(value);
  if (!isValidDomain(name)) throw badRequest(`--domain: "${value}" is not a domain name`);
  return name;
}

function queueState(value: string): QueueState {
  const state = value.toLowerCase();
  if (!(QUEUE_STATES as readonly string[]).includes(state)) throw badRequest(`--status must be one of ${QUEUE_STATES.join(', ')}, not "${value}"`);
  return state as QueueState;
}

/** Runs `fn` over `items`, at most PARALLEL_UPDATES at once. */
async function eachLimited<T>(items: T[], fn: (item: T) => Promise<void>): Promise<void> {
  await mapLimited(items, PARALLEL_UPDATES, fn);
}
