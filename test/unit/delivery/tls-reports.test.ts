import { expect } from 'chai';
import { simpleParser } from 'mailparser';
import { gunzipSync, gzipSync } from 'node:zlib';
import { addSession, countsKey, dayOf, emptyCounts, MAX_DETAILS, mergeCounts } from '../../../src/delivery/tls-reports/counts.ts';
import { buildReport, buildReportMail, reportFileName } from '../../../src/delivery/tls-reports/report.ts';
import { parseTlsRpt } from '../../../src/delivery/tls-reports/rua.ts';
import type { TlsSessionResult } from '../../../src/delivery/tls-outcome.ts';
import { assertTlsReport } from '../../helpers/tlsrpt-schema.ts';

const STS: TlsSessionResult = {
  policyDomain: 'Example.ORG',
  policyType: 'sts',
  policyStrings: ['version: STSv1', 'mode: enforce', 'mx: *.mx.example.org', 'max_age: 86400'],
  mxHosts: ['*.mx.example.org'],
  receivingMxHostname: 'a.mx.example.org',
  receivingIp: '192.0.2.25',
  sendingMtaIp: '198.51.100.7',
  success: true,
};
const failed = (type: NonNullable<TlsSessionResult['failure']>['type'], mx = 'a.mx.example.org', detail?: string): TlsSessionResult => ({
  ...STS,
  success: false,
  receivingMxHostname: mx,
  failure: { type, detail },
});

describe('TLS reporting: counts', () => {
  it('counts successes and failures per day and policy, failures in detail by type, sending address and MX', () => {
    const counts = emptyCounts('2026-11-21', STS);
    for (const r of [
      STS,
      STS,
      failed('certificate-expired'),
      failed('certificate-expired', 'a.mx.example.org', 'X509_V_ERR_CERT_HAS_EXPIRED'),
      failed('starttls-not-supported', 'b.mx.example.org'),
    ])
      addSession(counts, r);
    expect(counts).to.deep.include({ policyDomain: 'example.org', success: 2, failure: 3 });
    expect(counts.details).to.deep.equal([
      {
        resultType: 'certificate-expired',
        sendingMtaIp: '198.51.100.7',
        receivingMxHostname: 'a.mx.example.org',
        receivingIp: '192.0.2.25',
        count: 2,
        reason: 'X509_V_ERR_CERT_HAS_EXPIRED',
      },
      {
        resultType: 'starttls-not-supported',
        sendingMtaIp: '198.51.100.7',
        receivingMxHostname: 'b.mx.example.org',
        receivingIp: '192.0.2.25',
        count: 1,
        reason: null,
      },
    ]);
  });

  it('keys counts by UTC day, domain (any case) and policy: a changed policy is another entry', () => {
    const day = dayOf(Date.parse('2026-11-21T23:59:59.999Z'));
    expect(day).to.equal('2026-11-21');
    expect(countsKey(day, STS)).to.equal(countsKey(day, { ...STS, policyDomain: 'example.org' }));
    expect(countsKey(day, STS)).to.not.equal(countsKey(day, { ...STS, policyStrings: ['version: STSv1', 'mode: testing'] }));
    expect(countsKey(day, STS).startsWith('2026-11-21:example.org:')).to.equal(true);
  });

  it('merges stored and new counts, and keeps at most MAX_DETAILS failure rows (the summary counts all)', () => {
    const a = emptyCounts('2026-11-21', STS);
    const b = emptyCounts('2026-11-21', STS);
    addSession(a, failed('validation-failure', 'mx0.example.org'));
    for (let i = 0; i < MAX_DETAILS + 10; i++) addSession(b, failed('validation-failure', `mx${i}.example.org`));
    addSession(b, STS);
    const merged = mergeCounts(a, b);
    expect(merged.failure).to.equal(MAX_DETAILS + 11);
    expect(merged.success).to.equal(1);
    expect(merged.details).to.have.length(MAX_DETAILS);
    expect(merged.details[0]!.count).to.equal(2);
    // The stored record is not changed in place.
    expect(a.details[0]!.count).to.equal(1);
  });
});

describe('TLS reporting: the report (RFC 8460 §4.4)', () => {
  const counts = emptyCounts('2026-11-21', STS);
  addSession(counts, STS);
  addSession(counts, failed('certificate-host-mismatch', 'a.mx.example.org', 'Hostname/IP does not match'));
  const none = emptyCounts('2026-11-21', { ...STS, policyType: 'no-policy-found', policyStrings: [], mxHosts: [] });
  addSession(none, { ...STS, policyType: 'no-policy-found', policyStrings: [], mxHosts: [], sendingMtaIp: null });
  const report = buildReport({
    organization: 'Postilion Test',
    contact: 'tls@example.com',
    reportId: 'r-1@example.com',
    day: '2026-11-21',
    policies: [counts, none],
  });

  it('matches the schema of the RFC, with the day as its date range', () => {
    assertTlsReport(report);
    expect(report['date-range']).to.deep.equal({ 'start-datetime': '2026-11-21T00:00:00Z', 'end-datetime': '2026-11-21T23:59:59Z' });
    expect(report.policies[0]).to.deep.equal({
      policy: { 'policy-type': 'sts', 'policy-string': STS.policyStrings, 'policy-domain': 'example.org', 'mx-host': ['*.mx.example.org'] },
      summary: { 'total-successful-session-count': 1, 'total-failure-session-count': 1 },
      'failure-details': [
        {
          'result-type': 'certificate-host-mismatch',
          'sending-mta-ip': '198.51.100.7',
          'receiving-mx-hostname': 'a.mx.example.org',
          'receiving-ip': '192.0.2.25',
          'failed-session-count': 1,
          'failure-reason-code': 'Hostname/IP does not match',
        },
      ],
    });
    // No policy: neither policy strings nor failure details.
    expect(report.policies[1]).to.deep.equal({
      policy: { 'policy-type': 'no-policy-found', 'policy-domain': 'example.org' },
      summary: { 'total-successful-session-count': 1, 'total-failure-session-count': 0 },
    });
  });

  it('names the attachment submitter!domain!begin!end!id.json.gz, in seconds since the epoch', () => {
    expect(reportFileName('example.com', 'example.org', '2026-11-21', 'abc')).to.equal('example.com!example.org!1795219200!1795305599!abc.json.gz');
  });

  it('is mailed as multipart/report; report-type="tlsrpt" with the gzipped JSON as application/tlsrpt+gzip (§5.3)', async () => {
    const gzipped = gzipSync(Buffer.from(JSON.stringify(report)));
    const raw = buildReportMail({
      from: 'tls@example.com',
      to: 'reports@example.org',
      submitter: 'example.com',
      policyDomain: 'example.org',
      reportId: 'r-1@example.com',
      messageId: '<m1@example.com>',
      date: new Date('2026-11-22T01:17:00Z'),
      boundary: '=_b1',
      fileName: 'example.com!example.org!1795219200!1795305599!r-1.json.gz',
      gzipped,
      day: '2026-11-21',
    });
    expect(raw).to.match(/\r\nContent-Type: multipart\/report; report-type="tlsrpt"; boundary="=_b1"\r\n/);
    expect(raw).to.match(/\r\nTLS-Report-Domain: example.org\r\nTLS-Report-Submitter: example.com\r\n/);
    expect(raw).to.match(/\r\nSubject: Report Domain: example.org Submitter: example.com Report-ID: <r-1@example.com>\r\n/);
    expect(raw.split('\r\n').every((line) => line.length <= 998)).to.equal(true);
    const parsed = await simpleParser(raw);
    const [attachment] = parsed.attachments;
    expect(attachment!.contentType).to.equal('application/tlsrpt+gzip');
    expect(attachment!.filename).to.equal('example.com!example.org!1795219200!1795305599!r-1.json.gz');
    expect(JSON.parse(gunzipSync(attachment!.content).toString('utf8'))).to.deep.equal(report);
  });
});

describe('TLS reporting: the TLSRPT record (RFC 8460 §3)', () => {
  it('reads mailto: and https: targets of rua, skipping other schemes and other TXT records', () => {
    expect(parseTlsRpt(['v=spf1 -all', 'v=TLSRPTv1; rua=mailto:tls%2Breports@example.org,https://reports.example.org/tlsrpt, ftp://x.example'])).to.deep.equal({
      targets: [
        { kind: 'mailto', address: 'tls+reports@example.org' },
        { kind: 'https', url: 'https://reports.example.org/tlsrpt' },
      ],
    });
  });

  it('is absent without a v=TLSRPTv1 record, and unusable with several or without a usable rua', () => {
    expect(parseTlsRpt([])).to.equal(null);
    expect(parseTlsRpt(['v=TLSRPTv2; rua=mailto:a@example.org'])).to.equal(null);
    expect(parseTlsRpt(['v=TLSRPTv1; rua=mailto:a@example.org', 'v=TLSRPTv1; rua=mailto:b@example.org']))
      .to.have.property('problem')
      .that.matches(/2 TLSRPT records/);
    expect(parseTlsRpt(['v=TLSRPTv1;']))
      .to.have.property('problem')
      .that.matches(/no rua/);
    expect(parseTlsRpt(['v=TLSRPTv1; rua=http://reports.example.org/,mailto:not-an-address'])).to.have.property('problem');
  });

  it('takes at most five targets', () => {
    const rua = Array.from({ length: 8 }, (_, i) => `mailto:r${i}@example.org`).join(',');
    const found = parseTlsRpt([`v=TLSRPTv1; rua=${rua}`]);
    expect(found).to.have.property('targets').with.length(5);
  });
});
