import { createHash } from 'node:crypto';
import type { TlsFailureDetailRecord, TlsPolicyCountsRecord } from '../../store/records.ts';
import type { TlsSessionResult } from '../tls-outcome.ts';

/**
 * How sessions add up for TLS reporting: pure functions over TlsPolicyCountsRecord. A report
 * (RFC 8460 §4.4) has one entry per policy that applied during the day, with its success and
 * failure counts and its failures in detail.
 */

/** Failure details kept per policy and day; further failures are counted in the summary only. */
export const MAX_DETAILS = 100;
/** Longest policy string line and failure reason kept (a policy is at most 64 KiB anyway). */
const MAX_TEXT = 1000;
const MAX_LINES = 200;

/** The UTC day (YYYY-MM-DD) of an instant. */
export function dayOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** The key of the day's counts of one policy domain under one policy (TlsReportsRepo). */
export function countsKey(day: string, result: TlsSessionResult): string {
  const policy = JSON.stringify([result.policyType, result.policyStrings, result.mxHosts ?? []]);
  const hash = createHash('sha256').update(policy).digest('hex').slice(0, 16);
  return `${day}:${result.policyDomain.toLowerCase()}:${hash}`;
}

/** Empty counts for the policy of `result`. */
export function emptyCounts(day: string, result: TlsSessionResult): TlsPolicyCountsRecord {
  return {
    v: 1,
    day,
    policyDomain: result.policyDomain.toLowerCase(),
    policyType: result.policyType,
    policyStrings: result.policyStrings.slice(0, MAX_LINES).map(cut),
    mxHosts: (result.mxHosts ?? []).slice(0, MAX_LINES).map(cut),
    success: 0,
    failure: 0,
    details: [],
  };
}

/** Adds one session to `counts` (changed in place). */
export function addSession(counts: TlsPolicyCountsRecord, result: TlsSessionResult): void {
  if (result.success) {
    counts.success += 1;
    return;
  }
  counts.failure += 1;
  addDetail(counts.details, {
    resultType: result.failure?.type ?? 'validation-failure',
    sendingMtaIp: result.sendingMtaIp,
    receivingMxHostname: result.receivingMxHostname.toLowerCase(),
    receivingIp: result.receivingIp,
    count: 1,
    reason: result.failure?.detail ? cut(result.failure.detail) : null,
  });
}

/** `into` plus `more` (same key): a new record. */
export function mergeCounts(into: TlsPolicyCountsRecord | undefined, more: TlsPolicyCountsRecord): TlsPolicyCountsRecord {
  if (!into) return more;
  const details = into.details.map((d) => ({ ...d }));
  for (const d of more.details) addDetail(details, d);
  return { ...into, success: into.success + more.success, failure: into.failure + more.failure, details };
}

function addDetail(details: TlsFailureDetailRecord[], detail: TlsFailureDetailRecord): void {
  const same = details.find(
    (d) =>
      d.resultType === detail.resultType &&
      d.sendingMtaIp === detail.sendingMtaIp &&
      d.receivingMxHostname === detail.receivingMxHostname &&
      d.receivingIp === detail.receivingIp,
  );
  if (same) {
    same.count += detail.count;
    same.reason ??= detail.reason;
  } else if (details.length < MAX_DETAILS) details.push({ ...detail });
}

function cut(text: string): string {
  return text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) : text;
}
