import type { WriteOp } from './group-commit.ts';
import type { DueEntry, JobIndex } from './job-index.ts';
import type { JobRecord } from './records.ts';
import type { Store } from './store.ts';
import { Handover } from '../util/handover.ts';
import { newIdAt } from '../util/ids.ts';
import { iso, timeKey } from '../util/time.ts';

/** Jobs just created kept for their first read (a few MB): the engine reads them moments later. */
const FRESH_JOBS = 10_000;

/**
 * HTTP jobs (webhook deliveries, route POSTs). A pending job has an entry on the due-time index
 * at its `dueAt`; a held one (its webhook is disabled) is listed under its target until the
 * target is enabled again; a parked one (its origin is down) under its origin until a probe gets
 * through; a failed one is kept, listed by the time it failed, until the retention purge. A job
 * that succeeded is deleted.
 *
 * A new job is kept in its due-time entry alone (the entry's value is the record, `inEntry`):
 * most are sent once and succeed, and then one write makes them and one ends them. Once it
 * changes state (retried, held, parked, failed) its record is kept under its id in `jobs`, and
 * a pending one's entry points at it (the value is the id), as every job's did before schema 4.
 */
export class JobsRepo {
  private readonly fresh = new Handover<JobRecord>(FRESH_JOBS);

  constructor(
    private readonly store: Store,
    private readonly index: JobIndex,
  ) {}

  /** A job that has changed state since it was made (held, parked, failed, retried): see getMany for the others. */
  get(id: string): Promise<JobRecord | undefined> {
    return this.store.get<JobRecord>('jobs', id);
  }

  /**
   * Jobs in one read: the engine takes due jobs in batches. With `keys` (their due-time
   * entries, in the same order) a job kept in its entry is found there; an entry that points at
   * the job, or is gone, leads to its record under its id.
   */
  async getMany(ids: readonly string[], keys?: readonly string[]): Promise<Array<JobRecord | undefined>> {
    const found: Array<JobRecord | undefined> = ids.map((id) => this.fresh.peek(id));
    let unread = ids.flatMap((_, i) => (found[i] === undefined ? [i] : []));
    if (unread.length === 0) return found;
    if (keys) {
      const values = await this.store.getMany<JobRecord | string>(
        'schedule',
        unread.map((i) => keys[i]!),
      );
      for (const [n, i] of unread.entries()) {
        const value = values[n];
        if (typeof value === 'object' && value.id === ids[i]) found[i] = value;
      }
      unread = unread.filter((i) => found[i] === undefined);
      if (unread.length === 0) return found;
    }
    const read = await this.store.getMany<JobRecord>(
      'jobs',
      unread.map((i) => ids[i]!),
    );
    for (const [n, i] of unread.entries()) found[i] = read[n];
    return found;
  }

  /** A new pending job: its due-time entry, which holds its record (`job` is marked so). */
  create(job: JobRecord): WriteOp[] {
    job.inEntry = true;
    return [this.index.put(job.kind, job.id, Date.parse(job.dueAt), job)];
  }

  /**
   * Jobs whose creation has landed, kept for the engine's reads (getMany) until it takes them
   * into memory (`taken`) or they change (`change`): a job read and left on the index, because
   * its destination has no room yet, is still kept for its next read.
   */
  created(jobs: readonly JobRecord[]): void {
    for (const job of jobs) this.fresh.put(job.id, job);
  }

  /** The engine holds these jobs now: they need not be kept for it. */
  taken(ids: readonly string[]): void {
    for (const id of ids) this.fresh.drop(id);
  }

  /**
   * Ops moving `current` to `next` (null: deleted): its record, its index entry, its held,
   * parked or failed listing. A job kept in its entry moves into `jobs` when it changes.
   */
  change(current: JobRecord, next: JobRecord | null): WriteOp[] {
    this.fresh.drop(current.id);
    const ops: WriteOp[] = [...this.leave(current)];
    if (next === null) {
      if (current.inEntry !== true) ops.push({ type: 'del', family: 'jobs', key: current.id });
      return ops;
    }
    const { inEntry: _, ...record } = next;
    ops.push({ type: 'put', family: 'jobs', key: record.id, value: record }, ...this.enter(record));
    return ops;
  }

  private leave(job: JobRecord): WriteOp[] {
    if (job.state === 'pending') return [this.index.del(job.kind, job.id, Date.parse(job.dueAt))];
    if (job.state === 'held') return [{ type: 'del', family: 'jobsHeld', key: heldKey(job) }];
    if (job.state === 'parked') return [{ type: 'del', family: 'jobsParked', key: parkedKey(job) }];
    return [{ type: 'del', family: 'jobsFailed', key: failedKey(job) }];
  }

  private enter(job: JobRecord): WriteOp[] {
    if (job.state === 'pending') return [this.index.put(job.kind, job.id, Date.parse(job.dueAt))];
    if (job.state === 'held') return [{ type: 'put', family: 'jobsHeld', key: heldKey(job), value: job.id }];
    if (job.state === 'parked') return [{ type: 'put', family: 'jobsParked', key: parkedKey(job), value: job.id }];
    return [{ type: 'put', family: 'jobsFailed', key: failedKey(job), value: job.id }];
  }

  /** Ids of the jobs parked while `destination` is down, at most `limit`. */
  async parkedOn(destination: string, limit: number): Promise<string[]> {
    const prefix = `${destination} `;
    return (await this.store.families.jobsParked.values({ gt: prefix, lt: `${prefix}\xff`, limit }).all()) as string[];
  }

  /** Every destination with parked jobs, with its first job's id. */
  async *parkedDestinations(): AsyncGenerator<{ destination: string; first: string }> {
    let after = '';
    for (;;) {
      const [row] = (await this.store.families.jobsParked.iterator({ gt: after, limit: 1 }).all()) as Array<[string, string]>;
      if (!row) return;
      const destination = row[0].slice(0, row[0].lastIndexOf(' '));
      yield { destination, first: row[1] };
      // Past every key of this destination: the space sorts before what follows it.
      after = `${destination} \xff`;
    }
  }

  /** Ids of the jobs held for a target (a disabled webhook), at most `limit`. */
  async heldFor(targetId: string, limit: number): Promise<string[]> {
    const prefix = `${targetId}:`;
    return (await this.store.families.jobsHeld.values({ gt: prefix, lt: `${prefix}\xff`, limit }).all()) as string[];
  }

  /** Deletes jobs that failed before `beforeMs`, with their listing; returns how many. */
  async purgeFailedBefore(beforeMs: number): Promise<number> {
    let purged = 0;
    for (;;) {
      const rows = (await this.store.families.jobsFailed.iterator({ lt: `${timeKey(beforeMs)};`, limit: 1000 }).all()) as Array<[string, string]>;
      if (rows.length === 0) return purged;
      const jobs = await Promise.all(rows.map(([, id]) => this.get(id)));
      const ops: WriteOp[] = [];
      for (const [i, [key, id]] of rows.entries()) {
        ops.push({ type: 'del', family: 'jobsFailed', key });
        if (jobs[i]?.state === 'failed') ops.push({ type: 'del', family: 'jobs', key: id });
      }
      await this.store.commit(ops);
      purged += rows.length;
    }
  }

  /**
   * The pending jobs of these due-time entries, in one read. An entry whose job has moved on (a
   * stale one) is not the job's: it is left out, the job counts at its own entry or listing.
   */
  async pending(entries: readonly DueEntry[]): Promise<JobRecord[]> {
    const jobs = await this.getMany(
      entries.map((e) => e.id),
      entries.map((e) => e.key),
    );
    return jobs.filter((job, i): job is JobRecord => job?.state === 'pending' && Date.parse(job.dueAt) === entries[i]!.dueMs);
  }

  /** Every stored job of a kind: the pending ones in due order, then the held, parked and failed ones (tests, benchmarks). */
  async *list(kind: JobRecord['kind']): AsyncGenerator<JobRecord> {
    let batch: DueEntry[] = [];
    for await (const entry of this.index.entries(kind)) {
      batch.push(entry);
      if (batch.length < 500) continue;
      yield* await this.pending(batch);
      batch = [];
    }
    yield* await this.pending(batch);
    for await (const id of this.parked()) {
      const job = await this.get(id);
      if (job?.kind === kind) yield job;
    }
  }

  /** Every held, parked and failed job id (the operator's view; pending ones are on the index). */
  async *parked(): AsyncGenerator<string> {
    for await (const id of this.store.families.jobsHeld.values()) yield id as string;
    for await (const id of this.store.families.jobsParked.values()) yield id as string;
    for await (const id of this.store.families.jobsFailed.values()) yield id as string;
  }
}

/**
 * A new HTTP job, pending and due at `now`: a webhook's delivery of one event, or a route's POST
 * of an inbound message (`eventId`: the message's id) to `recipients`. Stored by `create`.
 */
export function newJob(kind: JobRecord['kind'], of: { accountId: string; targetId: string; eventId: string; recipients?: string[] }, now: number): JobRecord {
  const at = iso(now);
  return {
    v: 1,
    id: newIdAt(now),
    kind,
    accountId: of.accountId,
    targetId: of.targetId,
    eventId: of.eventId,
    ...(of.recipients === undefined ? {} : { recipients: of.recipients }),
    state: 'pending',
    attempts: 0,
    dueAt: at,
    createdAt: at,
    updatedAt: at,
    lastAttempt: null,
  };
}

function heldKey(job: JobRecord): string {
  return `${job.targetId}:${job.id}`;
}

/** `<origin> <id>`: a space never appears in an origin, and sorts before every character of an id. */
function parkedKey(job: JobRecord): string {
  return `${job.parkedOn ?? ''} ${job.id}`;
}

function failedKey(job: JobRecord): string {
  return `${timeKey(Date.parse(job.updatedAt))}:${job.id}`;
}
