import type { EventRecord, WebhookFlag, WebhookRecord } from '../store/records.ts';
import { nanoseconds } from '../util/time.ts';

/** Which flag subscribes to which stored event type (reference-api §5.2). Routes' events have none. */
export const FLAG_OF_EVENT: Readonly<Record<string, WebhookFlag>> = {
  'message.reception': 'on_reception',
  'message.delivered': 'on_delivered',
  'message.transient_error': 'on_transient_error',
  'message.failed': 'on_failed',
  'message.bounced': 'on_bounced',
  'message.suppressed': 'on_suppressed',
  'message.opened': 'on_opened',
  'message.clicked': 'on_clicked',
  'suppression.created': 'on_suppression_created',
  'domain.dns_error': 'on_dns_error',
};

/**
 * The domain a scoped webhook matches an event by: the sender's domain for message events, the
 * sending domain for `suppression.created`, the domain for `domain.dns_error`.
 */
export function eventDomain(event: EventRecord): string | null {
  const data = event.data;
  if (event.type === 'suppression.created') return lower(data.sending_domain);
  if (event.type === 'domain.dns_error') return lower(data.domain);
  if (typeof data.from !== 'string') return null;
  // A plain address, or `Name <address>` (campaign mail).
  const address = /<([^<>]*)>\s*$/.exec(data.from)?.[1] ?? data.from;
  const at = address.lastIndexOf('@');
  return at < 0
    ? null
    : address
        .slice(at + 1)
        .trim()
        .toLowerCase();
}

/** Whether the webhook wants the event: enabled, its flag set, and (scoped) one of its domains. */
export function wants(webhook: WebhookRecord, event: EventRecord, domains: ReadonlySet<string> | null): boolean {
  if (!webhook.enabled || webhook.accountId !== event.accountId) return false;
  const flag = FLAG_OF_EVENT[event.type];
  if (flag === undefined || !webhook.flags[flag]) return false;
  if (webhook.scope === 'global') return true;
  const domain = eventDomain(event);
  return domain !== null && domains !== null && domains.has(domain);
}

/**
 * The request body: `{type, timestamp, webhook_id, data}` in the producer's order, the
 * timestamp RFC 3339 with nanoseconds, `webhook_id` the configured webhook's id.
 */
export function envelope(event: EventRecord, webhookId: string): string {
  return JSON.stringify({ type: event.type, timestamp: nanoseconds(event.createdAt), webhook_id: webhookId, data: event.data });
}

function lower(value: unknown): string | null {
  return typeof value === 'string' ? value.toLowerCase() : null;
}
