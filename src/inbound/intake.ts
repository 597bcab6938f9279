import type { Logger } from 'pino';
import type { EventRecorder } from '../events/recorder.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { InboundRepo } from '../store/inbound-repo.ts';
import { newJob, type JobsRepo } from '../store/jobs-repo.ts';
import type { InboundAuthentication, InboundRecord, JobRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { iso, type Clock } from '../util/time.ts';
import type { Accepted } from './policy.ts';

/** Bytes of a bounce or complaint that are read to take it in: the report parts come first. */
export const REPORT_READ_BYTES = 2 * 1024 * 1024;
/** Pending records taken in per batch after a restart. */
const RESUME_BATCH = 100;

/** What the intake learns of a message's headers while it is received. */
export interface HeaderSummary {
  from: string;
  subject: string;
  messageId: string;
}

/** Bounces and complaints, taken in by the caller's rules (bounce parsing, outcomes, suppressions). */
export interface ReportHandler {
  bounce(record: InboundRecord, messageId: string, raw: Buffer): Promise<void>;
  complaint(record: InboundRecord, accountId: string, domain: string, raw: Buffer): Promise<void>;
}

export interface IntakeDeps {
  store: Store;
  repo: InboundRepo;
  jobs: JobsRepo;
  events: EventRecorder;
  /** Whether a route wants one POST for all of a message's recipients. */
  groupsByMessageId: (routeId: string) => Promise<boolean>;
  reports: ReportHandler;
  clock: Clock;
  log: Logger;
  /** Tells the engine of new route jobs. */
  notify: (dueMs: number) => void;
}

export interface Received {
  id: string;
  bodyId: string;
  client: InboundRecord['client'];
  mailFrom: string;
  recipients: Accepted[];
  size: number;
  headers: HeaderSummary;
  /** The chunks not yet written (the spool's tail), stored in the record's batch. */
  tail: WriteOp[];
  /** What the checks at arrival found (mail for routes). */
  authentication?: InboundAuthentication;
}

/**
 * What happens to a received message: one synced batch stores its record, its last chunks, one
 * route job per matching route (and recipient, unless the route groups by message) and a
 * `message.reception` event per account; only then does the client get 250. Bounces and
 * complaints in it are taken in next; a record whose intake did not finish is taken in again
 * after a restart.
 */
export class Intake {
  constructor(private readonly d: IntakeDeps) {}

  async store(r: Received): Promise<InboundRecord> {
    const now = this.d.clock.now();
    const pending = r.recipients.some((a) => a.kind !== 'route');
    const record: InboundRecord = {
      v: 1,
      id: r.id,
      receivedAt: iso(now),
      client: r.client,
      mailFrom: r.mailFrom,
      recipients: r.recipients,
      size: r.size,
      bodyId: r.bodyId,
      from: r.headers.from,
      subject: r.headers.subject,
      messageIdHeader: r.headers.messageId,
      state: pending ? 'pending' : 'done',
      ...(r.authentication ? { authentication: r.authentication } : {}),
    };
    const ops: WriteOp[] = [...r.tail, ...this.d.repo.put(record)];
    const jobs = await this.routeJobs(record, now);
    for (const job of jobs) ops.push(...this.d.jobs.create(job));
    ops.push(...this.receptionEvents(record));
    await this.d.store.commit(ops);
    if (jobs.length > 0) this.d.notify(now);
    return record;
  }

  /** Takes in the bounces and complaints of a stored record, then marks it done. */
  async takeIn(record: InboundRecord): Promise<void> {
    if (record.state !== 'pending') return;
    const reports = record.recipients.filter((a) => a.kind !== 'route');
    if (reports.length > 0) {
      const raw = await this.d.repo.head(record.bodyId, REPORT_READ_BYTES);
      for (const a of reports) {
        if (a.kind === 'bounce') await this.d.reports.bounce(record, a.messageId, raw);
        else if (a.kind === 'complaint') await this.d.reports.complaint(record, a.accountId, a.domain, raw);
      }
    }
    await this.d.store.commit(this.d.repo.put({ ...record, state: 'done' }));
  }

  /** After a restart: takes in what a crash interrupted. */
  async resume(): Promise<number> {
    let done = 0;
    for (;;) {
      const ids = await this.d.repo.pending(RESUME_BATCH);
      if (ids.length === 0) return done;
      for (const id of ids) {
        const record = await this.d.repo.get(id);
        try {
          if (record) await this.takeIn(record);
          else await this.d.store.commit(this.d.repo.dropPending(id));
        } catch (err) {
          this.d.log.error({ err, inbound_id: id }, 'could not take in an inbound bounce or complaint; it is left for the next start');
          return done;
        }
        done += 1;
      }
    }
  }

  /** One job per route and matching recipient, or per route when it groups by message. */
  private async routeJobs(record: InboundRecord, now: number): Promise<JobRecord[]> {
    const byRoute = new Map<string, { accountId: string; addresses: string[] }>();
    for (const a of record.recipients) {
      if (a.kind !== 'route') continue;
      for (const routeId of a.routeIds) {
        const entry = byRoute.get(routeId) ?? { accountId: a.accountId, addresses: [] };
        if (!entry.addresses.includes(a.address)) entry.addresses.push(a.address);
        byRoute.set(routeId, entry);
      }
    }
    const jobs: JobRecord[] = [];
    for (const [routeId, { accountId, addresses }] of byRoute) {
      const groups = (await this.d.groupsByMessageId(routeId)) ? [addresses] : addresses.map((a) => [a]);
      for (const recipients of groups) jobs.push(newJob('route', { accountId, targetId: routeId, eventId: record.id, recipients }, now));
    }
    return jobs;
  }

  /** `message.reception` for each account a route of which took the message. */
  private receptionEvents(record: InboundRecord): WriteOp[] {
    const seen = new Map<string, string>();
    for (const a of record.recipients) if (a.kind === 'route' && !seen.has(a.accountId)) seen.set(a.accountId, a.address);
    return [...seen].flatMap(([accountId, recipient]) =>
      this.d.events.record({
        type: 'message.reception',
        accountId,
        data: {
          account_id: accountId,
          event: 'on_reception',
          from: record.from || record.mailFrom,
          recipient,
          subject: record.subject,
          message_id_header: record.messageIdHeader,
          is_bot: false,
          id: record.id,
        },
      }),
    );
  }
}
