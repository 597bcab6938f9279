import { websiteHost, type SubAccountFigures } from '../../../accounts/sub-accounts.ts';
import type { UsageBucket, UsageReport } from '../../../accounts/usage.ts';
import type { AccountRecord } from '../../../store/records.ts';
import { iso } from '../../../util/time.ts';

export function presentSubAccount(a: AccountRecord, f: SubAccountFigures) {
  return {
    object: 'sub_account' as const,
    id: a.id,
    parent_account_id: a.parentAccountId!,
    created_at: a.createdAt,
    name: a.name,
    website: websiteHost(a.website),
    status: a.status,
    monthly_credit: a.monthlyCredit ?? 0,
    domain_count: f.domainCount,
    member_count: f.memberCount,
    last_activity_at: f.lastActivityAt,
  };
}

export const ALLOCATION_NOTE =
  "allocated_cost is this account's proportional share, by message volume, of the parent's pooled amount for the billing period; it is not what the account would pay on a plan of its own.";

const cost = (minor: number) => minor / 100;

function bucket(b: UsageBucket) {
  return {
    ...(b.accountId !== undefined ? { account_id: b.accountId } : {}),
    ...(b.name !== undefined ? { name: b.name } : {}),
    reception_count: b.receptions,
    allocated_cost: cost(b.allocatedMinor),
  };
}

export function presentUsage(r: UsageReport) {
  return {
    billing_period: { start: iso(r.period.start), end: iso(r.period.end) },
    currency: r.currency,
    allocation_method: 'proportional' as const,
    allocation_note: ALLOCATION_NOTE,
    parent: bucket(r.parent),
    sub_accounts: r.subAccounts.map(bucket),
    removed_sub_accounts: bucket(r.removed),
    total: bucket(r.total),
  };
}
