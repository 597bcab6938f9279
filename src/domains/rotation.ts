import type { DomainRecord } from '../store/records.ts';

const DAY = 24 * 60 * 60 * 1000;

export type RotationDecision =
  { kind: 'not_enabled' } | { kind: 'no_standby' } | { kind: 'wait'; until: number } | { kind: 'standby_not_published' } | { kind: 'rotate' };

/**
 * Whether a domain's standby key should take over now: rotation enabled, the interval since the
 * active key took over has passed, and every standby key's TXT record has been seen published.
 * `force` (the operator's on-demand rotation) skips the interval, never the publication.
 */
export function rotationDecision(domain: DomainRecord, now: number, force = false): RotationDecision {
  if (domain.dkimRotationIntervalDays === null && !force) return { kind: 'not_enabled' };
  const standby = domain.dkim.standby;
  if (!standby) return { kind: 'no_standby' };
  if (!force) {
    const since = Date.parse(domain.dkim.active.activatedAt ?? domain.createdAt);
    const due = since + domain.dkimRotationIntervalDays! * DAY;
    if (now < due) return { kind: 'wait', until: due };
  }
  return rotationReady(domain) ? { kind: 'rotate' } : { kind: 'standby_not_published' };
}

/** The standby slot's records have all been seen published. */
export function rotationReady(domain: DomainRecord): boolean {
  const standby = domain.dkim.standby;
  return standby !== null && standby.keys.length > 0 && standby.keys.every((k) => domain.dns.propagated[`dkim:${k.selector}`] === true);
}

/** Retired slots whose grace period is over. */
export function expiredRetired(domain: DomainRecord, now: number): DomainRecord['dkim']['retired'] {
  return domain.dkim.retired.filter((slot) => slot.publishUntil !== null && Date.parse(slot.publishUntil) <= now);
}

export { DAY };
