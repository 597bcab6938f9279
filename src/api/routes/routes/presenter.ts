import type { RouteView } from '../../../inbound/routes.ts';

export function presentRoute(route: RouteView) {
  return {
    object: 'route' as const,
    id: route.id,
    created_at: route.createdAt,
    updated_at: route.updatedAt,
    name: route.name,
    url: route.url,
    recipient: route.recipient,
    attachments: route.attachments,
    headers: route.headers,
    group_by_message_id: route.groupByMessageId,
    strip_replies: route.stripReplies,
    enabled: route.enabled,
    success_count: route.successCount,
    error_count: route.errorCount,
    errors_since_last_success: route.errorsSinceLastSuccess,
    last_request_at: route.lastRequestAt,
  };
}
