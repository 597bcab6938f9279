import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { InboundObserver } from '../smtp/inbound.ts';
import type { TrackingObserver } from '../tracking/thread-protocol.ts';

/** What the queue looks like now: the operator's `queue status`, reduced to what metrics need. */
export interface QueueSnapshot {
  /** Queued outbound mail by recipient domain. */
  destinations: Array<{ destination: string; due: number; deferred: number; scheduled: number; held: number; oldest_created_at: string }>;
  /** Stored HTTP jobs (webhook deliveries, route POSTs) by kind and URL origin. */
  jobs: Array<{ kind: string; pending: number; due: number; held: number; parked: number; failed: number }>;
}

/**
 * The daemon's Prometheus instruments, one registry per daemon (no module-level singletons: a test
 * can run two daemons in one process). Components get the instruments they feed, or a callback
 * that feeds them; nothing here reads the store on its own except the queue snapshot, which is
 * taken at most once per `queueRefreshMs` and served from the last one in between (a scan of the
 * due-time index costs about as much as `postilion queue status`).
 */
export class Metrics {
  readonly registry = new Registry();

  readonly apiRequests = new Counter({
    name: 'postilion_api_requests_total',
    help: 'API requests answered, by operation (operationId, or "unmatched") and HTTP status.',
    labelNames: ['operation', 'status'] as const,
    registers: [this.registry],
  });

  readonly apiDuration = new Histogram({
    name: 'postilion_api_request_duration_seconds',
    help: 'Time from the request reaching the app to its response, by operation.',
    labelNames: ['operation'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly smtpSessions = new Counter({
    name: 'postilion_smtp_sessions_total',
    help: 'SMTP sessions that ended, by listener (submission-starttls, submission-tls, inbound) and result (message: one or more messages accepted; none).',
    labelNames: ['listener', 'result'] as const,
    registers: [this.registry],
  });

  readonly smtpCommands = new Counter({
    name: 'postilion_smtp_commands_total',
    help: 'SMTP connections and commands decided by our policy, by listener, command (CONNECT, AUTH, MAIL, RCPT, DATA) and result (accepted, deferred: 4xx, rejected: 5xx).',
    labelNames: ['listener', 'command', 'result'] as const,
    registers: [this.registry],
  });

  readonly deliveries = new Counter({
    name: 'postilion_deliveries_total',
    help: 'Outcomes of delivery attempts, by outcome (delivered, transient_error, bounced, failed, suppressed) and bounce classification ("" when none).',
    labelNames: ['outcome', 'classification'] as const,
    registers: [this.registry],
  });

  readonly inboundMessages = new Counter({
    name: 'postilion_inbound_messages_total',
    help: 'Messages offered to the inbound MX (after DATA), by result (accepted; rejected: 5xx, e.g. too big; deferred: 4xx, could not be stored).',
    labelNames: ['listener', 'result'] as const,
    registers: [this.registry],
  });

  readonly inboundRecipients = new Counter({
    name: 'postilion_inbound_recipients_total',
    help: 'RCPT TO decisions of the inbound MX, by verdict (route, bounce, complaint: accepted as that; refused: 550, relay attempts included; deferred: 4xx).',
    labelNames: ['listener', 'verdict'] as const,
    registers: [this.registry],
  });

  readonly inboundDmarc = new Counter({
    name: 'postilion_inbound_dmarc_total',
    help: 'Mail for routes checked at arrival, by its DMARC result (pass, fail, none, temperror, permerror; unchecked: no single From address, or the checks did not finish) and what smtp.inbound.dmarc_policy did (accept, quarantine: marked in the payload, reject: 550 5.7.1).',
    labelNames: ['result', 'action'] as const,
    registers: [this.registry],
  });

  readonly httpDeliveries = new Counter({
    name: 'postilion_http_deliveries_total',
    help: 'Attempts at webhook deliveries and route POSTs, by kind (webhook, route) and outcome (delivered: 2xx; retry: refused, tried again later; failed: the last attempt failed; unreachable: the endpoint answered nothing, the job waits for it; held: its target is disabled; dropped: its target, or what it was about, is gone).',
    labelNames: ['kind', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly shapingThrottles = new Counter({
    name: 'postilion_shaping_throttles_total',
    help: 'Lanes (source and destination) slowed or suspended by traffic shaping after a throttling or reputation reply, by provider, reply rule and action (slow, suspend); a throttle held longer by more such replies counts once.',
    labelNames: ['provider', 'rule', 'action'] as const,
    registers: [this.registry],
  });

  readonly trackingRequests = new Counter({
    name: 'postilion_tracking_requests_total',
    help: 'Requests the tracking listener answered, by listener, kind (open: /o/, click: /c/, other) and HTTP status (200 and 302 are hits, 404 an unknown host, token, message or link).',
    labelNames: ['listener', 'kind', 'status'] as const,
    registers: [this.registry],
  });

  readonly trackingHits = new Counter({
    name: 'postilion_tracking_hits_total',
    help: 'Opens and clicks answered by the tracking listener and handed over to be recorded, by listener and kind (open, click); bots included.',
    labelNames: ['listener', 'kind'] as const,
    registers: [this.registry],
  });

  /** Counts for the tracking listener (a thread of its own: its counts come over in messages). */
  readonly tracking: TrackingObserver = {
    requests: (kind, status, count) => this.trackingRequests.inc({ listener: 'tracking', kind, status: String(status) }, count),
    hits: (kind, count) => this.trackingHits.inc({ listener: 'tracking', kind }, count),
  };

  /** Counts for the inbound MX: its sessions and commands with the submission listeners', its recipients and messages. */
  readonly inbound: InboundObserver = {
    session: (listener, result) => this.smtpSessions.inc({ listener, result }),
    command: (listener, command, result) => this.smtpCommands.inc({ listener, command, result }),
    recipient: (verdict) => this.inboundRecipients.inc({ listener: 'inbound', verdict }),
    message: (result) => this.inboundMessages.inc({ listener: 'inbound', result }),
    dmarc: (result, action) => this.inboundDmarc.inc({ result, action }),
  };

  readonly storeCommitDuration = new Histogram({
    name: 'postilion_store_commit_duration_seconds',
    help: 'Time to write and sync one group-committed LevelDB batch.',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });

  readonly storeBatchWriters = new Histogram({
    name: 'postilion_store_commit_writers',
    help: 'Writers (callers) whose operations one synced batch carried.',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [this.registry],
  });

  readonly storeBatchOps = new Histogram({
    name: 'postilion_store_commit_operations',
    help: 'Put and delete operations in one synced batch.',
    buckets: [1, 4, 16, 64, 256, 1024, 4096, 16384],
    registers: [this.registry],
  });

  readonly dkimSignatures = new Counter({
    name: 'postilion_dkim_signatures_total',
    help: 'DKIM-Signature header fields made, by algorithm (rsa-sha256, ed25519-sha256).',
    labelNames: ['algorithm'] as const,
    registers: [this.registry],
  });

  readonly tlsReports = new Counter({
    name: 'postilion_tls_reports_total',
    help: 'TLS reports (RFC 8460) sent or not, by method (mailto: accepted into the queue; https: POSTed) and result (sent, failed).',
    labelNames: ['method', 'result'] as const,
    registers: [this.registry],
  });

  /** Set at the start and at each reload from mta_sts_policy.domains. */
  readonly dashboardSignIns = new Counter({
    name: 'postilion_dashboard_sign_ins_total',
    help: 'Sign-ins to the web dashboard, by kind (api_key, operator) and result (ok, refused).',
    labelNames: ['kind', 'result'] as const,
    registers: [this.registry],
  });

  readonly mtaStsPolicies = new Gauge({
    name: 'postilion_mta_sts_policies',
    help: 'MTA-STS policies this server publishes on its listeners (mta_sts_policy.domains), by mode (enforce, testing, none).',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });

  private readonly queueMessages = new Gauge({
    name: 'postilion_queue_messages',
    help: `Queued outbound messages by state (due, deferred, scheduled, held) and destination (recipient domain; the ${MAX_DESTINATIONS} largest, the rest summed as "other").`,
    labelNames: ['state', 'destination'] as const,
    registers: [this.registry],
  });

  private readonly queueOldest = new Gauge({
    name: 'postilion_queue_oldest_message_age_seconds',
    help: 'Age of the oldest queued outbound message (0 when the queue is empty).',
    registers: [this.registry],
  });

  private readonly httpBacklog = new Gauge({
    name: 'postilion_http_jobs',
    help: 'Stored webhook deliveries and route POSTs, by kind (webhook, route) and state (pending: waiting for an attempt; due: of those, due now; held: target disabled; parked: waiting for an endpoint that answers nothing; failed), refreshed with the queue figures.',
    labelNames: ['kind', 'state'] as const,
    registers: [this.registry],
  });

  private readonly queueSnapshotAge = new Gauge({
    name: 'postilion_queue_snapshot_age_seconds',
    help: 'How old the queue figures are: they are refreshed from the store at most every metrics.queue_refresh_seconds.',
    registers: [this.registry],
  });

  private snapshot: { at: number; value: QueueSnapshot } | null = null;
  private refreshing: Promise<void> | null = null;

  /**
   * `queue`: reads the queue figures (null: none are shown). `collect`: asked before each scrape,
   * to bring in counts kept elsewhere (the tracking listener's thread); a collection that fails or
   * takes over a second is not waited for.
   */
  constructor(
    private readonly queue: { read: () => Promise<QueueSnapshot>; refreshMs: number; now: () => number } | null,
    private readonly collect: () => Promise<void> = async () => {},
  ) {
    // Event-loop lag, heap, GC, file descriptors, process CPU and memory.
    collectDefaultMetrics({ register: this.registry, prefix: 'postilion_', eventLoopMonitoringPrecision: 20 });
    // Gauges that prom-client names like counters: `promtool check metrics` refuses the suffix.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      this.registry.removeSingleMetric(`postilion_${name}`);
    }
  }

  /**
   * Counts a stored event that reports a delivery outcome (the store's put listener on the events
   * family calls this once the outcome's batch has landed, so nothing is counted that was not kept).
   */
  countEvent(event: { type?: unknown; data?: { delivery_attempt?: { classification?: unknown } } } | null | undefined): void {
    const outcome = typeof event?.type === 'string' ? OUTCOMES[event.type] : undefined;
    if (!outcome) return;
    const classification = event?.data?.delivery_attempt?.classification;
    this.deliveries.inc({ outcome, classification: typeof classification === 'string' ? classification : '' });
  }

  /** The exposition text; refreshes the queue snapshot first when it is stale. */
  async render(): Promise<string> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.collect().catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, COLLECT_MS)))]).finally(() =>
      clearTimeout(timer),
    );
    await this.refreshQueue();
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private async refreshQueue(): Promise<void> {
    const queue = this.queue;
    if (!queue) return;
    const now = queue.now();
    if (!this.snapshot || now - this.snapshot.at >= queue.refreshMs) {
      // One scan at a time; concurrent scrapes wait for it rather than starting their own.
      this.refreshing ??= queue
        .read()
        .then((value) => {
          this.snapshot = { at: queue.now(), value };
          this.setQueueGauges(value, queue.now());
        })
        .finally(() => (this.refreshing = null));
      await this.refreshing;
    }
    if (this.snapshot) this.queueSnapshotAge.set(Math.max(0, (queue.now() - this.snapshot.at) / 1000));
  }

  private setQueueGauges(snapshot: QueueSnapshot, now: number): void {
    this.setJobGauges(snapshot.jobs);
    this.queueMessages.reset();
    const sorted = [...snapshot.destinations].sort((a, b) => total(b) - total(a));
    const other = { due: 0, deferred: 0, scheduled: 0, held: 0 };
    let oldest = Infinity;
    for (const [i, d] of sorted.entries()) {
      oldest = Math.min(oldest, Date.parse(d.oldest_created_at));
      if (i >= MAX_DESTINATIONS) {
        other.due += d.due;
        other.deferred += d.deferred;
        other.scheduled += d.scheduled;
        other.held += d.held;
        continue;
      }
      for (const state of STATES) this.queueMessages.set({ state, destination: d.destination }, d[state]);
    }
    if (sorted.length > MAX_DESTINATIONS) for (const state of STATES) this.queueMessages.set({ state, destination: 'other' }, other[state]);
    this.queueOldest.set(Number.isFinite(oldest) ? Math.max(0, (now - oldest) / 1000) : 0);
  }

  /** The HTTP jobs summed over their origins: every kind and state has its series, 0 included. */
  private setJobGauges(jobs: QueueSnapshot['jobs']): void {
    for (const kind of HTTP_KINDS) {
      for (const state of JOB_STATES)
        this.httpBacklog.set(
          { kind, state },
          jobs.reduce((sum, j) => sum + (j.kind === kind ? j[state] : 0), 0),
        );
    }
  }
}

const STATES = ['due', 'deferred', 'scheduled', 'held'] as const;
const HTTP_KINDS = ['webhook', 'route'] as const;
const JOB_STATES = ['pending', 'due', 'held', 'parked', 'failed'] as const;
/** A scrape waits this long at most for counts kept elsewhere. */
const COLLECT_MS = 1000;
const OUTCOMES: Record<string, string> = {
  'message.delivered': 'delivered',
  'message.transient_error': 'transient_error',
  'message.bounced': 'bounced',
  'message.failed': 'failed',
  'message.suppressed': 'suppressed',
};
/** Label values are series: a queue for 10,000 domains must not make 30,000 of them. */
const MAX_DESTINATIONS = 50;

const total = (d: { due: number; deferred: number; scheduled: number }) => d.due + d.deferred + d.scheduled;
