import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startPolicyHost, stsPolicy, type PolicyHost } from '../../helpers/mta-sts-host.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';
import { startTestCa } from '../../helpers/tls.ts';
import { assertTlsReport } from '../../helpers/tlsrpt-schema.ts';
import { startReportReceiver, type ReportReceiver } from '../../helpers/tlsrpt-receiver.ts';

/**
 * TLS reporting of real sessions: the daemon delivers to a domain with an MTA-STS enforce policy
 * whose preferred MX presents a certificate for another name (refused before MAIL FROM) and whose
 * second MX has a certificate of the test CA for its name; the next day's report, POSTed to the
 * domain's https rua, counts exactly the sessions the two sinks saw.
 */
const DAY = 86_400_000;
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const DOMAIN = 'reported.test';
const MX = ['mx.wrong.test', 'mx.good.test'];

describe('TLS reporting of delivery sessions under MTA-STS, end to end', function () {
  this.timeout(30_000);
  let dir: string;
  let good: SmtpSink;
  let wrong: SmtpSink;
  let host: PolicyHost;
  let receiver: ReportReceiver;
  let bed: MessageBed;

  before(async () => {
    const ca = await startTestCa();
    dir = mkdtempSync(join(tmpdir(), 'postilion-tlsrpt-e2e-'));
    writeFileSync(join(dir, 'ca.pem'), ca.cert);
    const goodTls = await ca.issue(['mx.good.test']);
    good = await startSink({ host: '127.0.0.2', tls: { key: goodTls.key, cert: goodTls.chain } });
    const wrongTls = await ca.issue(['other.test']);
    wrong = await startSink({ host: '127.0.0.4', port: good.port, tls: { key: wrongTls.key, cert: wrongTls.chain } });
    host = await startPolicyHost(ca, [DOMAIN]);
    host.policies.set(DOMAIN, stsPolicy('enforce', MX));
    receiver = await startReportReceiver(ca, `reports.${DOMAIN}`);
    bed = await startMessageBed({
      ...POLLING,
      delivery: { enabled: true, mx_port: good.port, mta_sts: { ca_file: join(dir, 'ca.pem'), port: host.port, allow_private: true } },
      tls_reporting: { enabled: true, from: 'tls-reports@example.com', ca_file: join(dir, 'ca.pem'), allow_networks: ['127.0.0.0/8'] },
    });
    const zone = bed.dns.zone;
    zone.set(
      DOMAIN,
      'MX',
      MX.map((exchange, i) => ({ exchange, priority: 10 * (i + 1) })),
    );
    zone.set('mx.good.test', 'A', ['127.0.0.2']);
    zone.set('mx.wrong.test', 'A', ['127.0.0.4']);
    zone.set(`_mta-sts.${DOMAIN}`, 'TXT', ['v=STSv1; id=rpt1']);
    zone.set(`mta-sts.${DOMAIN}`, 'A', ['127.0.0.1']);
    zone.set(`_smtp._tls.${DOMAIN}`, 'TXT', [`v=TLSRPTv1; rua=https://reports.${DOMAIN}:${receiver.port}/tlsrpt`]);
    zone.set(`reports.${DOMAIN}`, 'A', ['127.0.0.1']);
  });
  after(async () => {
    await bed?.stop();
    await Promise.all([good?.close(), wrong?.close(), host?.close(), receiver?.close()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("counts the day's sessions, verified and refused for the certificate's name, in the report POSTed to the domain's rua", async () => {
    const day = new Date(bed.clock.now()).toISOString().slice(0, 10);
    const sent = await bed.send({ recipients: ['a', 'b', 'c'].map((name) => ({ email: `${name}@${DOMAIN}` })) });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    for (const message of sent.body.data as Array<{ id: string }>) await bed.until(message.id, 'Delivered');
    // Every message was refused by the preferred MX's certificate, then went over verified TLS to the other.
    expect(good.received.map((r) => r.secure)).to.deep.equal([true, true, true]);
    expect(wrong.received).to.have.length(0);
    expect(wrong.connections).to.equal(3);
    expect(good.connections).to.be.within(1, 3);

    bed.clock.advance(DAY);
    const reports = bed.server.daemon.parts.mail.tlsReports!;
    expect(await reports.sendReports()).to.deep.equal({ domains: 1, sent: 1, unreported: 0, failed: 0 });
    expect(receiver.received).to.have.length(1);
    expect(receiver.received[0]!.contentType).to.equal('application/tlsrpt+gzip');
    const report = JSON.parse(gunzipSync(receiver.received[0]!.body).toString('utf8'));
    assertTlsReport(report);
    expect(report['date-range']['start-datetime']).to.equal(`${day}T00:00:00Z`);
    expect(report.policies).to.have.length(1);
    const [entry] = report.policies;
    expect(entry.policy).to.deep.equal({
      'policy-type': 'sts',
      'policy-string': ['version: STSv1', 'mode: enforce', ...MX.map((m) => `mx: ${m}`), 'max_age: 86400'],
      'policy-domain': DOMAIN,
      'mx-host': MX,
    });
    // One session per connection the sinks saw: a reused session is counted once.
    expect(entry.summary).to.deep.equal({ 'total-successful-session-count': good.connections, 'total-failure-session-count': wrong.connections });
    // sending-mta-ip: the local address of the failed sessions, as the sink saw them.
    expect(new Set(wrong.peers).size).to.equal(1);
    expect(entry['failure-details']).to.deep.equal([
      {
        'result-type': 'certificate-host-mismatch',
        'sending-mta-ip': wrong.peers[0],
        'receiving-mx-hostname': 'mx.wrong.test',
        'receiving-ip': '127.0.0.4',
        'failed-session-count': 3,
        'failure-reason-code': 'certificate does not name mx.wrong.test',
      },
    ]);
  });
});
