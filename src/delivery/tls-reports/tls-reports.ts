import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { Logger } from 'pino';
import type { DnsResolver } from '../../domains/resolver.ts';
import type { WriteOp } from '../../store/group-commit.ts';
import type { TlsPolicyCountsRecord } from '../../store/records.ts';
import type { TlsReportsRepo } from '../../store/tls-reports-repo.ts';
import type { Cidr } from '../../util/cidr.ts';
import { newIdAt } from '../../util/ids.ts';
import type { Clock } from '../../util/time.ts';
import type { TlsReportSink, TlsSessionResult } from '../tls-outcome.ts';
import { addSession, countsKey, dayOf, emptyCounts, mergeCounts } from './counts.ts';
import { postReport } from './https-post.ts';
import { buildReport, reportFileName } from './report.ts';
import { parseTlsRpt, type ReportTarget } from './rua.ts';

const gzipAsync = promisify(gzip);

/**
 * TLS reporting (RFC 8460). Delivery tells each session's result to `record()`, which only counts
 * in memory (it is on the hot path); the counts are added to the day's stored ones every few
 * seconds and at stop. Once a day `sendReports()` builds, for each policy domain of the days
 * that have ended, the report of that day, and sends it to the `rua` of the domain's
 * `_smtp._tls` TXT record: by mail through Postilion's own delivery, or as an HTTPS POST.
 */

/** Sends one report by mail (queue/tls-report-mailer.ts): accepted into the queue, or throws. */
export interface ReportMailer {
  send(mail: { to: string; policyDomain: string; day: string; reportId: string; fileName: string; gzipped: Buffer }): Promise<void>;
  /** The submitter's domain (the from address's). */
  readonly submitter: string;
}

export interface TlsReportsSettings {
  organization: string;
  contact: string;
  maxDomainsPerDay: number;
  timeoutMs: number;
  allowNetworks: readonly Cidr[];
  ca?: Buffer | undefined;
}

export interface TlsReportsDeps {
  repo: TlsReportsRepo;
  commit: (ops: WriteOp[]) => Promise<void>;
  clock: Clock;
  resolver: Pick<DnsResolver, 'txt' | 'addresses'>;
  mailer: ReportMailer;
  log: Logger;
  /** Told of each report sent or not, by method. */
  observe?: (method: 'mailto' | 'https', result: 'sent' | 'failed') => void;
}

/** What one run of the daily job did. */
export interface ReportRun {
  /** Policy domains with counts of days that ended. */
  domains: number;
  /** Reports sent to at least one target. */
  sent: number;
  /** Domains without a TLSRPT record (their counts are dropped). */
  unreported: number;
  /** Domains whose every target failed (kept for the next run, up to KEEP_DAYS). */
  failed: number;
}

/** Records read per run of the daily job at most (the rest waits for the next run). */
const MAX_RECORDS_PER_RUN = 100_000;
/** Counts whose report could not be sent are kept this many days, then dropped. */
const KEEP_DAYS = 3;
/** Domains reported on at once. */
const PARALLEL = 4;

export class TlsReports implements TlsReportSink {
  /** Counts not yet written, by key. */
  private pending = new Map<string, TlsPolicyCountsRecord>();
  /** Policy domains counted on the current day (the cap). */
  private domainsToday = new Set<string>();
  private today = '';
  private flushing: Promise<void> = Promise.resolve();
  /** Sessions not counted since the last log line: the day's cap of domains was reached. */
  private dropped = 0;

  constructor(
    private readonly deps: TlsReportsDeps,
    private readonly settings: TlsReportsSettings,
  ) {}

  record(result: TlsSessionResult): void {
    const day = dayOf(this.deps.clock.now());
    if (day !== this.today) {
      this.today = day;
      this.domainsToday.clear();
    }
    const domain = result.policyDomain.toLowerCase();
    if (!this.domainsToday.has(domain)) {
      if (this.domainsToday.size >= this.settings.maxDomainsPerDay) {
        this.dropped += 1;
        return;
      }
      this.domainsToday.add(domain);
    }
    const key = countsKey(day, result);
    let counts = this.pending.get(key);
    if (!counts) {
      counts = emptyCounts(day, result);
      this.pending.set(key, counts);
    }
    addSession(counts, result);
  }

  /** Adds the counts kept in memory to the stored ones; one flush at a time. */
  flush(): Promise<void> {
    const next = this.flushing.then(() => this.write());
    this.flushing = next.catch(() => undefined);
    return next;
  }

  private async write(): Promise<void> {
    if (this.dropped > 0) {
      this.deps.log.warn(
        { sessions: this.dropped, max_domains_per_day: this.settings.maxDomainsPerDay },
        'TLS sessions not counted for reporting: too many policy domains today',
      );
      this.dropped = 0;
    }
    if (this.pending.size === 0) return;
    const taken = this.pending;
    this.pending = new Map();
    const keys = [...taken.keys()];
    try {
      const stored = await this.deps.repo.getMany(keys);
      await this.deps.commit(keys.map((key, i) => this.deps.repo.put(key, mergeCounts(stored[i], taken.get(key)!))));
    } catch (err) {
      // Not lost: merged back for the next flush.
      for (const [key, counts] of taken) this.pending.set(key, mergeCounts(this.pending.get(key), counts));
      throw err;
    }
  }

  /** The daily job: a report per policy domain and day that ended, to the domain's rua. */
  async sendReports(): Promise<ReportRun> {
    await this.flush();
    const now = this.deps.clock.now();
    const today = dayOf(now);
    const rows = await this.deps.repo.before(today, MAX_RECORDS_PER_RUN);
    const groups = new Map<string, Array<[string, TlsPolicyCountsRecord]>>();
    for (const row of rows) {
      const group = `${row[1].day}:${row[1].policyDomain}`;
      const list = groups.get(group) ?? [];
      list.push(row);
      groups.set(group, list);
    }
    const run: ReportRun = { domains: groups.size, sent: 0, unreported: 0, failed: 0 };
    const queue = [...groups.values()];
    const worker = async () => {
      for (let group = queue.shift(); group; group = queue.shift()) {
        const outcome = await this.reportOne(group, now).catch((err: unknown) => {
          this.deps.log.warn({ err, policy_domain: group[0]![1].policyDomain, day: group[0]![1].day }, 'TLS report not sent');
          return 'failed' as const;
        });
        const old = Date.parse(`${group[0]![1].day}T00:00:00Z`) < now - KEEP_DAYS * 86_400_000;
        if (outcome !== 'failed' || old) await this.deps.commit(group.map(([key]) => this.deps.repo.delete(key)));
        run[outcome] += 1;
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    this.deps.log.info(run, 'TLS reports sent');
    return run;
  }

  /** Sends one domain's report of one day; 'failed' when no target took it. */
  private async reportOne(group: Array<[string, TlsPolicyCountsRecord]>, now: number): Promise<'sent' | 'unreported' | 'failed'> {
    const { policyDomain, day } = group[0]![1];
    const found = parseTlsRpt(await this.deps.resolver.txt(`_smtp._tls.${policyDomain}`));
    if (found === null) return 'unreported';
    const log = this.deps.log.child({ policy_domain: policyDomain, day });
    if ('problem' in found) {
      log.info({ problem: found.problem }, 'TLS report not sent: the TLSRPT record is not usable');
      return 'unreported';
    }
    const reportId = `${newIdAt(now)}@${this.deps.mailer.submitter}`;
    const report = buildReport({
      organization: this.settings.organization,
      contact: this.settings.contact,
      reportId,
      day,
      policies: group.map(([, counts]) => counts),
    });
    const gzipped = await gzipAsync(Buffer.from(JSON.stringify(report), 'utf8'));
    let sent = 0;
    for (const target of found.targets) {
      const error = await this.sendTo(target, { policyDomain, day, reportId, gzipped });
      this.deps.observe?.(target.kind, error === null ? 'sent' : 'failed');
      if (error === null) sent += 1;
      else log.warn({ target: describe(target), error }, 'TLS report not sent to a target');
    }
    return sent > 0 ? 'sent' : 'failed';
  }

  /** Null when the target took the report, else why not. */
  private async sendTo(target: ReportTarget, r: { policyDomain: string; day: string; reportId: string; gzipped: Buffer }): Promise<string | null> {
    if (target.kind === 'mailto') {
      try {
        const fileName = reportFileName(this.deps.mailer.submitter, r.policyDomain, r.day, r.reportId.split('@')[0]!);
        await this.deps.mailer.send({ to: target.address, ...r, fileName });
        return null;
      } catch (err) {
        return (err as Error).message;
      }
    }
    const result = await postReport(target.url, r.gzipped, {
      resolver: this.deps.resolver,
      allowNetworks: this.settings.allowNetworks,
      timeoutMs: this.settings.timeoutMs,
      ca: this.settings.ca,
    });
    return result.ok ? null : result.error;
  }
}

function describe(target: ReportTarget): string {
  return target.kind === 'mailto' ? `mailto:${target.address}` : target.url;
}
