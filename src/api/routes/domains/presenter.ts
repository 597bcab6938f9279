import type { PresentedRecord } from '../../../domains/dns-checker.ts';
import { rotationReady } from '../../../domains/rotation.ts';
import type { DomainRecord } from '../../../store/records.ts';

export function presentDomain(domain: DomainRecord, records: PresentedRecord[]) {
  return {
    object: 'domain' as const,
    id: domain.id,
    created_at: domain.createdAt,
    updated_at: domain.updatedAt,
    last_dns_check_at: domain.dns.checkedAt,
    domain: domain.name,
    account_id: domain.accountId,
    dns_records: records.map((r) => ({
      type: r.type,
      label: r.label,
      host: r.host,
      content: r.content,
      required: r.required,
      propagated: r.propagated,
    })),
    dns_valid: domain.dns.valid,
    // Not in the contract: says that dns_valid was set by the operator's hand, not by a check.
    dns_verified_by_hand: domain.dns.byHand ? { at: domain.dns.byHand.at, by: domain.dns.byHand.by } : null,
    tracking_subdomain: domain.trackingSubdomain,
    return_path_subdomain: domain.returnPathSubdomain,
    subscription_subdomain: domain.subscriptionSubdomain,
    media_subdomain: domain.mediaSubdomain,
    dkim_rotation_interval_days: domain.dkimRotationIntervalDays,
    // The override only, as the contract says; the selector in use shows in dns_records.
    dkim_selector: domain.dkimSelectorOverride ?? null,
    rotation_ready: rotationReady(domain),
    dsn_recipient: domain.dsnRecipient,
  };
}
