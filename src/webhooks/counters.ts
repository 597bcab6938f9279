import type { WriteOp } from '../store/group-commit.ts';
import type { WebhookRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';

export interface WebhookCounts {
  successCount: number;
  errorCount: number;
  errorsSinceLastSuccess: number;
  lastRequestAt: string | null;
}

const ZERO: WebhookCounts = { successCount: 0, errorCount: 0, errorsSinceLastSuccess: 0, lastRequestAt: null };

/**
 * A webhook's delivery counters, apart from its record so that an attempt's outcome never
 * rewrites what the API changed. This process owns them: once read they are kept in memory,
 * each attempt changes them in place and puts the whole value in its outcome batch (batches land
 * in order, so the last value written is the newest).
 */
export class WebhookCounters {
  private readonly known = new Map<string, WebhookCounts>();

  constructor(private readonly store: Store) {}

  async of(webhookId: string): Promise<WebhookCounts> {
    const cached = this.known.get(webhookId);
    if (cached) return { ...cached };
    const stored = (await this.store.get<WebhookCounts>('webhookCounters', webhookId)) ?? ZERO;
    // Another attempt may have loaded them while this read was under way.
    const now = this.known.get(webhookId) ?? { ...stored };
    this.known.set(webhookId, now);
    if (this.known.size > 20_000) this.known.delete(this.known.keys().next().value!);
    return { ...now };
  }

  /** The record with its current counters (what the API shows). */
  async overlay(webhook: WebhookRecord): Promise<WebhookRecord> {
    return { ...webhook, ...(await this.of(webhook.id)) };
  }

  /** Counts one attempt; returns the new counters and the op that stores them. */
  async count(webhookId: string, ok: boolean, at: string): Promise<{ counts: WebhookCounts; op: WriteOp }> {
    await this.of(webhookId);
    const c = this.known.get(webhookId)!;
    if (ok) {
      c.successCount += 1;
      c.errorsSinceLastSuccess = 0;
    } else {
      c.errorCount += 1;
      c.errorsSinceLastSuccess += 1;
    }
    if (c.lastRequestAt === null || at > c.lastRequestAt) c.lastRequestAt = at;
    return { counts: { ...c }, op: this.put(webhookId, c) };
  }

  /** Enabled again by its owner: the run of failures starts over. */
  async resetErrors(webhookId: string): Promise<WriteOp> {
    await this.of(webhookId);
    const c = this.known.get(webhookId)!;
    c.errorsSinceLastSuccess = 0;
    return this.put(webhookId, c);
  }

  forget(webhookId: string): WriteOp {
    this.known.delete(webhookId);
    return { type: 'del', family: 'webhookCounters', key: webhookId };
  }

  private put(webhookId: string, c: WebhookCounts): WriteOp {
    return { type: 'put', family: 'webhookCounters', key: webhookId, value: { ...c } };
  }
}
