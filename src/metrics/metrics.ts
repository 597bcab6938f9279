import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** What the queue looks like now: the operator's `queue status`, reduced to what metrics need. */
export type QueueSnapshot = Array<{ destination: string; due: number; deferred: number; scheduled: number; held: number; oldest_created_at: string }>;

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
    help: 'SMTP sessions that ended, by listener (submission-starttls, submission-tls) and result (message: one or more messages accepted; none).',
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

  private readonly queueSnapshotAge = new Gauge({
    name: 'postilion_queue_snapshot_age_seconds',
    help: 'How old the queue figures are: they are refreshed from the store at most every metrics.queue_refresh_seconds.',
    registers: [this.registry],
  });

  private snapshot: { at: number; value: QueueSnapshot } | null = null;
  private refreshing: Promise<void> | null = null;

  constructor(
    private readonly queue: { read: () => Promise<QueueSnapshot>; refreshMs: number; now: () => number } | null,
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
    this.queueMessages.reset();
    const sorted = [...snapshot].sort((a, b) => total(b) - total(a));
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
}

const STATES = ['due', 'deferred', 'scheduled', 'held'] as const;
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
