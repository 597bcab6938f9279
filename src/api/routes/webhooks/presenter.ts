import type { WebhookRecord } from '../../../store/records.ts';

/** `domains`: the associated domains that still exist (see Webhooks.domainsOf). */
export function presentWebhook(webhook: WebhookRecord, domains: string[]) {
  return {
    object: 'webhook' as const,
    id: webhook.id,
    created_at: webhook.createdAt,
    updated_at: webhook.updatedAt,
    name: webhook.name,
    url: webhook.url,
    enabled: webhook.enabled,
    on_reception: webhook.flags.on_reception,
    on_delivered: webhook.flags.on_delivered,
    on_transient_error: webhook.flags.on_transient_error,
    on_failed: webhook.flags.on_failed,
    on_bounced: webhook.flags.on_bounced,
    on_suppressed: webhook.flags.on_suppressed,
    on_opened: webhook.flags.on_opened,
    on_clicked: webhook.flags.on_clicked,
    on_suppression_created: webhook.flags.on_suppression_created,
    on_dns_error: webhook.flags.on_dns_error,
    scope: webhook.scope,
    domains: webhook.scope === 'global' ? [] : domains,
    success_count: webhook.successCount,
    error_count: webhook.errorCount,
    errors_since_last_success: webhook.errorsSinceLastSuccess,
    last_request_at: webhook.lastRequestAt,
  };
}
