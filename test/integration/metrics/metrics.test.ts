import { spawnSync } from 'node:child_process';
import { expect } from 'chai';
import { call } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/** The tests poll the read API on a clock that stands still: the token bucket must not run dry. */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };

/** `name{labels} value` lines of an exposition, as a map from the series to its value. */
function series(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

function promtool(): string | null {
  const found = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : null;
}

describe('metrics listener', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;

  beforeEach(async () => {
    sink = await startSink();
    // With every listener of a default daemon, the tracking thread too (the harness leaves it off unless asked): /readyz counts it.
    bed = await startMessageBed({ ...POLLING, tracking: {}, delivery: { enabled: true, mx_port: sink.port } });
    for (const domain of ['example.org', 'example.net']) {
      bed.dns.zone.set(domain, 'MX', [{ exchange: `mx1.${domain}`, priority: 10 }]);
      bed.dns.zone.set(`mx1.${domain}`, 'A', ['127.0.0.1']);
    }
  });

  afterEach(async () => {
    await bed?.stop();
    await sink?.close();
  });

  const scrape = async (path = '/metrics') => {
    const res = await fetch(bed.server.daemon.parts.metrics.url + path);
    return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
  };

  it('answers /healthz and /readyz, and 404 or 405 for anything else', async () => {
    expect((await scrape('/healthz')).status).to.equal(200);
    const ready = await scrape('/readyz');
    expect(ready.status).to.equal(200);
    expect(ready.text).to.equal('ready\n');
    expect((await scrape('/nothing')).status).to.equal(404);
    const post = await fetch(bed.server.daemon.parts.metrics.url + '/metrics', { method: 'POST', body: 'x' });
    expect(post.status).to.equal(405);
    expect(post.headers.get('allow')).to.equal('GET, HEAD');
  });

  it('counts API requests, deliveries by outcome and classification, DKIM signatures, store commits and the queue after real traffic', async () => {
    sink.rcpt = (address) =>
      address.startsWith('gone@')
        ? { code: 550, text: '5.1.1 No such user' }
        : address.endsWith('@example.net')
          ? { code: 451, text: '4.7.1 Greylisted, try again later' }
          : null;
    const delivered = await bed.send({ recipients: [{ email: 'rcpt@example.org' }] });
    const bounced = await bed.send({ recipients: [{ email: 'gone@example.org' }] });
    const deferred = await bed.send({ recipients: [{ email: 'later@example.net' }] });
    for (const res of [delivered, bounced, deferred]) expect(res.status, JSON.stringify(res.body)).to.equal(202);
    await bed.until(delivered.body.data[0].id, 'Delivered');
    await bed.until(bounced.body.data[0].id, 'Bounced');
    await bed.until(deferred.body.data[0].id, 'Deferred');
    expect((await call(bed.server, 'GET', '/v2/ping')).status).to.equal(200);
    expect((await call(bed.server, 'GET', '/v2/nothing-here', { operationId: null })).status).to.equal(404);
    // The deferred message is now 200 s old, short of its first retry (300 s ± 20 %).
    bed.clock.advance(200_000);

    const { status, type, text } = await scrape();
    expect(status).to.equal(200);
    expect(type).to.match(/^text\/plain; version=0\.0\.4/);
    const m = series(text);
    expect(m.get('postilion_api_requests_total{operation="ping",status="200"}')).to.equal(1);
    expect(m.get('postilion_api_requests_total{operation="createMessage",status="202"}')).to.equal(3);
    expect(m.get('postilion_api_requests_total{operation="unmatched",status="404"}')).to.equal(1);
    expect(m.get('postilion_api_request_duration_seconds_count{operation="createMessage"}')).to.equal(3);
    expect(m.get('postilion_deliveries_total{outcome="delivered",classification=""}')).to.equal(1);
    expect(m.get('postilion_deliveries_total{outcome="bounced",classification="InvalidRecipient"}')).to.equal(1);
    expect(m.get('postilion_deliveries_total{outcome="transient_error",classification="PolicyRelated"}')).to.equal(1);
    // Each of the three was signed before its transaction began.
    expect(m.get('postilion_dkim_signatures_total{algorithm="rsa-sha256"}')).to.equal(3);
    expect(m.get('postilion_store_commit_duration_seconds_count')).to.be.greaterThan(0);
    expect(m.get('postilion_store_commit_writers_sum')).to.be.at.least(m.get('postilion_store_commit_writers_count')!);
    expect(m.get('postilion_store_commit_operations_count')).to.equal(m.get('postilion_store_commit_duration_seconds_count'));
    expect(m.get('postilion_queue_messages{state="deferred",destination="example.net"}')).to.equal(1);
    expect(m.get('postilion_queue_messages{state="due",destination="example.net"}')).to.equal(0);
    expect(m.get('postilion_queue_oldest_message_age_seconds')).to.be.within(200, 210);
    expect(m.get('postilion_nodejs_eventloop_lag_seconds')).to.be.a('number');

    const tool = promtool();
    if (!tool) {
      console.log('      (promtool not installed: apt-get install prometheus to check the exposition format)');
      return;
    }
    const checked = spawnSync(tool, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(checked.status, `${checked.stdout}${checked.stderr}`).to.equal(0);
  });

  it('is off with metrics.enabled false', async () => {
    await bed.stop();
    bed = await startMessageBed({ metrics: { enabled: false } });
    expect(() => bed.server.daemon.parts.metrics.url).to.throw(/metrics listener is off/);
  });

  it('counts SMTP sessions and commands by listener and result', async () => {
    await bed.stop();
    bed = await startMessageBed({ ...POLLING, smtp: { submission: { enabled: true, plain_auth_from: ['127.0.0.0/8'] } } });
    const created = await call(bed.server, 'POST', `/v2/accounts/${bed.server.accountId}/smtp-credentials`, { body: { name: 'app', scope: 'global' } });
    expect(created.status).to.equal(201);
    const port = bed.server.daemon.parts.submission.ports.find((p) => !p.secure)!.port;
    const { createTransport } = await import('nodemailer');
    const send = (pass: string) => {
      const t = createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, auth: { user: created.body.username, pass } });
      return t.sendMail({ from: 'app@example.com', to: 'rcpt@example.org', subject: 's', text: 't' }).finally(() => t.close());
    };
    await send(created.body.password);
    await send('wrong').catch(() => undefined);
    const m = series((await scrape()).text);
    const l = 'listener="submission-starttls"';
    expect(m.get(`postilion_smtp_commands_total{${l},command="CONNECT",result="accepted"}`)).to.equal(2);
    expect(m.get(`postilion_smtp_commands_total{${l},command="AUTH",result="accepted"}`)).to.equal(1);
    expect(m.get(`postilion_smtp_commands_total{${l},command="AUTH",result="rejected"}`)).to.equal(1);
    expect(m.get(`postilion_smtp_commands_total{${l},command="MAIL",result="accepted"}`)).to.equal(1);
    expect(m.get(`postilion_smtp_commands_total{${l},command="RCPT",result="accepted"}`)).to.equal(1);
    expect(m.get(`postilion_smtp_commands_total{${l},command="DATA",result="accepted"}`)).to.equal(1);
    // Sessions are counted when they close: give the second one its moment.
    for (let i = 0; i < 20 && (series((await scrape()).text).get(`postilion_smtp_sessions_total{${l},result="none"}`) ?? 0) < 1; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const after = series((await scrape()).text);
    expect(after.get(`postilion_smtp_sessions_total{${l},result="message"}`)).to.equal(1);
    expect(after.get(`postilion_smtp_sessions_total{${l},result="none"}`)).to.equal(1);
  });
});
