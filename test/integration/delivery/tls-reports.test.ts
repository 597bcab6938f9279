import { expect } from 'chai';
import { simpleParser } from 'mailparser';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { postReport } from '../../../src/delivery/tls-reports/https-post.ts';
import type { TlsReports } from '../../../src/delivery/tls-reports/tls-reports.ts';
import type { TlsSessionResult } from '../../../src/delivery/tls-outcome.ts';
import { parseCidr } from '../../../src/util/cidr.ts';
import { verifyDkim } from '../../helpers/domains.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';
import { startTestCa, type TestCa } from '../../helpers/tls.ts';
import { assertTlsReport } from '../../helpers/tlsrpt-schema.ts';
import { startReportReceiver, type ReportReceiver } from '../../helpers/tlsrpt-receiver.ts';

const DAY = 86_400_000;
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };

const session = (domain: string, over: Partial<TlsSessionResult> = {}): TlsSessionResult => ({
  policyDomain: domain,
  policyType: 'sts',
  policyStrings: ['version: STSv1', 'mode: enforce', `mx: mx1.${domain}`, 'max_age: 86400'],
  mxHosts: [`mx1.${domain}`],
  receivingMxHostname: `mx1.${domain}`,
  receivingIp: '127.0.0.1',
  sendingMtaIp: null,
  success: true,
  ...over,
});
const expired = (domain: string) => session(domain, { success: false, failure: { type: 'certificate-expired', detail: 'certificate has expired' } });

function reportsOf(server: TestServer): TlsReports {
  const reports = server.daemon.parts.mail.tlsReports;
  expect(reports, 'tls_reporting is on').to.not.equal(null);
  return reports!;
}

describe('TLS reporting (RFC 8460), end to end', function () {
  this.timeout(30_000);

  it('refuses to start with tls_reporting on and no from address, or a ca_file it cannot read', async () => {
    for (const [tls, message] of [
      [{ enabled: true }, /tls_reporting\.from: an address at a domain of this server is required/],
      [{ enabled: true, from: 'tls@example.com', ca_file: '/nonexistent/ca.pem' }, /tls_reporting\.ca_file: cannot read/],
    ] as const) {
      const started = await startServer({ config: { delivery: { enabled: true }, tls_reporting: tls } }).then(
        async (server) => {
          await server.stop();
          return null;
        },
        (err: Error) => err,
      );
      expect(started?.message).to.match(message);
    }
  });

  describe('by mail', () => {
    let sink: SmtpSink;
    let bed: MessageBed;

    before(async () => {
      sink = await startSink();
      bed = await startMessageBed({
        ...POLLING,
        delivery: { enabled: true, mx_port: sink.port },
        tls_reporting: { enabled: true, from: 'tls-reports@example.com', organization: 'Postilion Test' },
      });
      bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
      bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
      bed.dns.zone.set('_smtp._tls.example.org', 'TXT', ['v=TLSRPTv1; rua=mailto:tlsrpt@example.org']);
    });
    after(async () => {
      await bed?.stop();
      await sink?.close();
    });

    it("sends each policy domain that publishes _smtp._tls the day's report, gzipped JSON in a DKIM-signed multipart/report", async () => {
      const reports = reportsOf(bed.server);
      const day = new Date(bed.clock.now()).toISOString().slice(0, 10);
      for (const r of [session('example.org'), session('example.org'), session('example.org'), expired('example.org'), expired('example.org')])
        reports.record(r);
      // No TLSRPT record: counted, never reported.
      reports.record(session('example.net'));
      // Today's sessions wait for the day to end.
      expect(await reports.sendReports()).to.deep.equal({ domains: 0, sent: 0, unreported: 0, failed: 0 });

      bed.clock.advance(DAY);
      expect(await reports.sendReports()).to.deep.equal({ domains: 2, sent: 1, unreported: 1, failed: 0 });
      const [mail] = await sink.waitFor(1);
      expect(mail!.to).to.deep.equal(['tlsrpt@example.org']);
      // Sent like a DSN: a null return path, so an undeliverable report bounces to no one.
      expect(mail!.from).to.equal('');
      const parsed = await simpleParser(mail!.raw);
      const type = parsed.headers.get('content-type') as { value: string; params: Record<string, string> };
      expect(type.value).to.equal('multipart/report');
      expect(type.params['report-type']).to.equal('tlsrpt');
      expect(parsed.headers.get('tls-report-domain')).to.equal('example.org');
      expect(parsed.headers.get('tls-report-submitter')).to.equal('example.com');
      expect(parsed.from!.value[0]!.address).to.equal('tls-reports@example.com');
      const [attachment] = parsed.attachments;
      expect(attachment!.contentType).to.equal('application/tlsrpt+gzip');
      expect(attachment!.filename).to.match(
        new RegExp(`^example\\.com!example\\.org!${Date.parse(`${day}T00:00:00Z`) / 1000}!${Date.parse(`${day}T23:59:59Z`) / 1000}!.+\\.json\\.gz$`),
      );
      const report = JSON.parse(gunzipSync(attachment!.content).toString('utf8'));
      assertTlsReport(report);
      expect(report['organization-name']).to.equal('Postilion Test');
      expect(report['contact-info']).to.equal('tls-reports@example.com');
      expect(report['date-range']['start-datetime']).to.equal(`${day}T00:00:00Z`);
      expect(report.policies).to.have.length(1);
      expect(report.policies[0].summary).to.deep.equal({ 'total-successful-session-count': 3, 'total-failure-session-count': 2 });
      expect(report.policies[0]['failure-details']).to.deep.equal([
        {
          'result-type': 'certificate-expired',
          'receiving-mx-hostname': 'mx1.example.org',
          'receiving-ip': '127.0.0.1',
          'failed-session-count': 2,
          'failure-reason-code': 'certificate has expired',
        },
      ]);
      const verified = await verifyDkim(bed, mail!.raw);
      expect(verified.map((v) => v.result)).to.include('pass');

      // Sent once: the day's counts are gone, and the metric counts the report.
      expect(await reports.sendReports()).to.deep.equal({ domains: 0, sent: 0, unreported: 0, failed: 0 });
      const metrics = await (await fetch(bed.server.daemon.parts.metrics.url + '/metrics')).text();
      expect(metrics).to.contain('postilion_tls_reports_total{method="mailto",result="sent"} 1');
    });
  });

  describe('by HTTPS POST', () => {
    let ca: TestCa;
    let receiver: ReportReceiver;
    let bed: MessageBed;
    let dir: string;
    let restarted: TestServer | null = null;

    before(async () => {
      ca = await startTestCa();
      receiver = await startReportReceiver(ca, 'reports.example.net');
      dir = mkdtempSync(join(tmpdir(), 'postilion-tlsrpt-'));
      writeFileSync(join(dir, 'ca.pem'), ca.cert);
      bed = await startMessageBed({
        ...POLLING,
        delivery: { enabled: true, mx_port: 9 },
        tls_reporting: { enabled: true, from: 'tls-reports@example.com', ca_file: join(dir, 'ca.pem'), allow_networks: ['127.0.0.0/8'] },
      });
      bed.dns.zone.set('reports.example.net', 'A', ['127.0.0.1']);
      bed.dns.zone.set('_smtp._tls.example.net', 'TXT', [`v=TLSRPTv1; rua=https://reports.example.net:${receiver.port}/tlsrpt`]);
    });
    after(async () => {
      await restarted?.stop();
      await bed?.stop();
      await receiver?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('counts survive a restart (written at stop), and the report is POSTed as application/tlsrpt+gzip; a failed POST is retried on the next run', async () => {
      const before = reportsOf(bed.server);
      before.record(session('example.net'));
      before.record(expired('example.net'));
      restarted = await bed.server.restart();
      const reports = reportsOf(restarted);
      reports.record(session('example.net'));

      bed.clock.advance(DAY);
      receiver.status = 503;
      expect(await reports.sendReports()).to.deep.equal({ domains: 1, sent: 0, unreported: 0, failed: 1 });
      expect(receiver.received).to.have.length(1);

      receiver.status = 200;
      expect(await reports.sendReports()).to.deep.equal({ domains: 1, sent: 1, unreported: 0, failed: 0 });
      const posted = receiver.received[1]!;
      expect(posted.contentType).to.equal('application/tlsrpt+gzip');
      const report = JSON.parse(gunzipSync(posted.body).toString('utf8'));
      assertTlsReport(report);
      expect(report['organization-name']).to.equal('mx.postilion.test');
      expect(report.policies[0].policy['policy-domain']).to.equal('example.net');
      expect(report.policies[0].summary).to.deep.equal({ 'total-successful-session-count': 2, 'total-failure-session-count': 1 });
      const metrics = await (await fetch(restarted.daemon.parts.metrics.url + '/metrics')).text();
      expect(metrics).to.contain('postilion_tls_reports_total{method="https",result="failed"} 1');
      expect(metrics).to.contain('postilion_tls_reports_total{method="https",result="sent"} 1');
    });

    it('refuses loopback and private targets unless allowed, does not follow redirects, and verifies the certificate', async () => {
      const resolver = bed.server.daemon.core.resolver;
      const url = `https://reports.example.net:${receiver.port}/tlsrpt`;
      const body = Buffer.from('x');
      const count = receiver.received.length;
      const settings = { resolver, timeoutMs: 5000, ca: Buffer.from(ca.cert) };

      const byName = await postReport(url, body, { ...settings, allowNetworks: [] });
      expect(byName).to.deep.include({ ok: false });
      expect((byName as { error: string }).error).to.match(
        /refused to connect to reports\.example\.net \(127\.0\.0\.1\): a loopback address.*tls_reporting\.allow_networks/,
      );
      const byAddress = await postReport(`https://127.0.0.1:${receiver.port}/`, body, { ...settings, allowNetworks: [] });
      expect((byAddress as { error: string }).error).to.match(/a loopback address/);
      expect(receiver.received).to.have.length(count);

      receiver.status = 302;
      expect(await postReport(url, body, { ...settings, allowNetworks: [parseCidr('127.0.0.0/8')] })).to.deep.equal({ ok: false, error: 'HTTP 302' });
      receiver.status = 200;
      // Without the test CA the certificate does not verify.
      const untrusted = await postReport(url, body, { resolver, timeoutMs: 5000, allowNetworks: [parseCidr('127.0.0.0/8')] });
      expect((untrusted as { error: string }).error).to.match(/certificate/i);
    });
  });
});
