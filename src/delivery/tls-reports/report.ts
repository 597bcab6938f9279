import type { TlsPolicyCountsRecord } from '../../store/records.ts';

/**
 * The aggregate report of RFC 8460 §4: JSON as §4.4 names its fields, gzipped for transport
 * (§5.1), and the mail that carries it (§5.3). Pure: the sender sends what these build.
 */

export interface ReportInput {
  organization: string;
  contact: string;
  reportId: string;
  /** The UTC day reported on, YYYY-MM-DD. */
  day: string;
  /** The day's counts of one policy domain (one entry per policy that applied). */
  policies: readonly TlsPolicyCountsRecord[];
}

/** RFC 8460 §4.4, field for field. */
export interface TlsReport {
  'organization-name': string;
  'date-range': { 'start-datetime': string; 'end-datetime': string };
  'contact-info': string;
  'report-id': string;
  policies: Array<{
    policy: {
      'policy-type': 'sts' | 'tlsa' | 'no-policy-found';
      'policy-string'?: string[];
      'policy-domain': string;
      'mx-host'?: string[];
    };
    summary: { 'total-successful-session-count': number; 'total-failure-session-count': number };
    'failure-details'?: Array<{
      'result-type': string;
      'sending-mta-ip'?: string;
      'receiving-mx-hostname': string;
      'receiving-ip'?: string;
      'failed-session-count': number;
      'failure-reason-code'?: string;
    }>;
  }>;
}

export function dayRange(day: string): { start: Date; end: Date } {
  const start = new Date(`${day}T00:00:00Z`);
  return { start, end: new Date(start.getTime() + 86_400_000 - 1000) };
}

/** RFC 3339 without fractions ("2026-11-21T00:00:00Z"). */
function stamp(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function buildReport(input: ReportInput): TlsReport {
  const { start, end } = dayRange(input.day);
  return {
    'organization-name': input.organization,
    'date-range': { 'start-datetime': stamp(start), 'end-datetime': stamp(end) },
    'contact-info': input.contact,
    'report-id': input.reportId,
    policies: input.policies.map((p) => ({
      policy: {
        'policy-type': p.policyType,
        ...(p.policyType === 'no-policy-found' ? {} : { 'policy-string': p.policyStrings }),
        'policy-domain': p.policyDomain,
        ...(p.policyType === 'sts' && p.mxHosts.length > 0 ? { 'mx-host': p.mxHosts } : {}),
      },
      summary: { 'total-successful-session-count': p.success, 'total-failure-session-count': p.failure },
      ...(p.details.length > 0
        ? {
            'failure-details': p.details.map((d) => ({
              'result-type': d.resultType,
              ...(d.sendingMtaIp ? { 'sending-mta-ip': d.sendingMtaIp } : {}),
              'receiving-mx-hostname': d.receivingMxHostname,
              ...(d.receivingIp ? { 'receiving-ip': d.receivingIp } : {}),
              'failed-session-count': d.count,
              ...(d.reason ? { 'failure-reason-code': d.reason } : {}),
            })),
          }
        : {}),
    })),
  };
}

/**
 * The attachment's file name (RFC 8460 §5.3):
 * `submitter!policy-domain!begin-timestamp!end-timestamp!unique-id.json.gz`, timestamps in
 * seconds since the epoch.
 */
export function reportFileName(submitter: string, policyDomain: string, day: string, uniqueId: string): string {
  const { start, end } = dayRange(day);
  const safe = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, '_');
  return `${safe(submitter)}!${safe(policyDomain)}!${start.getTime() / 1000}!${end.getTime() / 1000}!${safe(uniqueId)}.json.gz`;
}

export interface ReportMailInput {
  from: string;
  to: string;
  /** The submitter's domain (RFC 8460 §5.3 TLS-Report-Submitter). */
  submitter: string;
  policyDomain: string;
  reportId: string;
  messageId: string;
  date: Date;
  boundary: string;
  fileName: string;
  /** The gzipped JSON report. */
  gzipped: Buffer;
  day: string;
}

/**
 * The mail of RFC 8460 §5.3: multipart/report; report-type="tlsrpt", a human-readable part, then
 * the report as application/tlsrpt+gzip in base64. CRLF line ends throughout.
 */
export function buildReportMail(m: ReportMailInput): string {
  const headers = [
    `From: TLS reporting <${m.from}>`,
    `To: <${m.to}>`,
    `Subject: Report Domain: ${m.policyDomain} Submitter: ${m.submitter} Report-ID: <${m.reportId}>`,
    `Date: ${m.date.toUTCString().replace(/GMT$/, '+0000')}`,
    `Message-ID: ${m.messageId}`,
    `TLS-Report-Domain: ${m.policyDomain}`,
    `TLS-Report-Submitter: ${m.submitter}`,
    'Auto-Submitted: auto-generated',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type="tlsrpt"; boundary="${m.boundary}"`,
  ];
  const text = [
    `This is an aggregate TLS report (RFC 8460) from ${m.submitter}`,
    `on the delivery sessions to ${m.policyDomain} on ${m.day} (UTC).`,
    `The report is attached as gzipped JSON.`,
  ];
  const base64 = m.gzipped.toString('base64').replace(/.{1,76}/g, '$&\r\n');
  const body = [
    `--${m.boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    'Content-Transfer-Encoding: 7bit',
    '',
    ...text,
    '',
    `--${m.boundary}`,
    `Content-Type: application/tlsrpt+gzip; name="${m.fileName}"`,
    'Content-Transfer-Encoding: base64',
    `Content-Disposition: attachment; filename="${m.fileName}"`,
    '',
    base64.replace(/\r\n$/, ''),
    '',
    `--${m.boundary}--`,
    '',
  ];
  return [...headers, '', ...body].join('\r\n');
}
