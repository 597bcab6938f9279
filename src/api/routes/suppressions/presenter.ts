import type { SuppressionRecord } from '../../../store/records.ts';
import { isProtected } from '../../../accounts/suppressions.ts';

export function presentSuppression(s: SuppressionRecord) {
  return {
    object: 'suppression' as const,
    id: s.id,
    created_at: s.createdAt,
    email: s.email,
    domain: s.domain,
    reason: s.reason,
    expires_at: s.expiresAt,
    /** A complaint's: kept by `DELETE …/suppressions/all`. */
    protected: isProtected(s),
  };
}
