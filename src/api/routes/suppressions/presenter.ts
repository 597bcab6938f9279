import type { SuppressionRecord } from '../../../store/records.ts';

export function presentSuppression(s: SuppressionRecord) {
  return {
    object: 'suppression' as const,
    id: s.id,
    created_at: s.createdAt,
    email: s.email,
    domain: s.domain,
    reason: s.reason,
    expires_at: s.expiresAt,
  };
}
