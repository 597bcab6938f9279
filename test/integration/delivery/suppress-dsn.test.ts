import { expect } from 'chai';
import { simpleParser } from 'mailparser';
import { verifyDkim } from '../../helpers/domains.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';
import { EventsRepo } from '../../../src/store/events-repo.ts';

/** The tests poll the read API on a clock that stands still: the token bucket must not run dry. */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const DAY = 86_400_000;

describe('suppressions and DSNs in delivery', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let suppressions: string;

  beforeEach(async () => {
    sink = await startSink();
    bed = await startMessageBed({
      ...POLLING,
      delivery: { enabled: true, mx_port: sink.port, retry: { first_delay_seconds: 60, max_age_hours: 1, jitter: 0 } },
    });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    suppressions = `/v2/accounts/${bed.server.accountId}/suppressions`;
  });

  afterEach(async () => {
    await bed?.stop();
    await sink?.close();
  });

  async function sendTo(...emails: string[]): Promise<string[]> {
    const res = await bed.send({ recipients: emails.map((email) => ({ email })) });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.data.map((d: { id: string }) => d.id);
  }

  const events = (type: string) => new EventsRepo(bed.server.daemon.core.store).recent(bed.server.accountId, 50, type);
  const suppressed = async (email: string) => (await bed.api('GET', `${suppressions}?email=${encodeURIComponent(email)}`)).body.data;

  it('suppresses a hard-bounced address for 30 days, announces it, and skips it on the next send', async () => {
    sink.rcpt = (address) => (address === 'gone@example.org' ? { code: 550, text: '5.1.1 no such user' } : null);
    const [first] = await sendTo('gone@example.org');
    await bed.until(first!, 'Bounced');
    const [row] = await suppressed('gone@example.org');
    expect(row).to.include({ email: 'gone@example.org', domain: 'example.com' });
    expect(row.reason).to.match(/^Hard bounce \(InvalidRecipient\): 550 5\.1\.1 no such user/);
    expect(Date.parse(row.expires_at) - Date.parse(row.created_at)).to.equal(30 * DAY);
    const [created] = await events('suppression.created');
    expect(created!.data).to.include({ recipient: 'gone@example.org', sending_domain: 'example.com', reason: row.reason });

    const [second] = await sendTo('gone@example.org');
    const message = await bed.until(second!, 'Suppressed');
    expect(message.delivery_attempts[0].log).to.contain('is suppressed for example.com');
    const [event] = await events('message.suppressed');
    expect(event!.data).to.include({ event: 'on_suppressed', recipient: 'gone@example.org' });
    expect(event!.data).to.not.have.property('delivery_attempt');
    // Only the first message reached the server (and was refused there).
    expect(sink.received).to.have.length(0);
    expect(await events('suppression.created')).to.have.length(1);
  });

  it('renews an expired suppression on the next hard bounce, and the expiry purge keeps the renewed one', async () => {
    sink.rcpt = (address) => (address === 'again@example.org' ? { code: 550, text: '5.1.1 no such user' } : null);
    const [first] = await sendTo('again@example.org');
    await bed.until(first!, 'Bounced');
    bed.clock.advance(31 * DAY);
    const [second] = await sendTo('again@example.org');
    await bed.until(second!, 'Bounced');
    const rows = await suppressed('again@example.org');
    expect(rows).to.have.length(1);
    expect(Date.parse(rows[0].created_at)).to.equal(bed.clock.now());
    expect(await bed.server.daemon.core.suppressions.purgeExpired()).to.equal(0);
    expect(await suppressed('again@example.org')).to.have.length(1);
    const [third] = await sendTo('again@example.org');
    await bed.until(third!, 'Suppressed');
  });

  it('does not suppress after a bounce that blames the sender or the content', async () => {
    sink.rcpt = () => ({ code: 554, text: '5.7.1 Message rejected as spam' });
    const [id] = await sendTo('picky@example.org');
    await bed.until(id!, 'Bounced');
    expect(await suppressed('picky@example.org')).to.have.length(0);
    expect(await events('suppression.created')).to.have.length(0);
  });

  it('suppresses an address whose delivery finally failed after its retries', async () => {
    sink.rcpt = () => ({ code: 451, text: '4.3.0 try again later' });
    const [id] = await sendTo('slow@example.org');
    await bed.until(id!, 'Deferred');
    for (let i = 0; i < 10 && (await bed.read(id!)).status === 'Deferred'; i++) {
      bed.clock.advance(30 * 60_000);
      await bed.server.daemon.parts.jobs.engine.wake();
      await new Promise((r) => setTimeout(r, 100));
    }
    const failed = await bed.until(id!, 'Failed');
    expect(failed.num_attempts).to.be.greaterThan(1);
    const [row] = await suppressed('slow@example.org');
    expect(row.reason).to.match(/^Delivery failed after \d+ attempts \(TransientFailure\): 451 4\.3\.0/);
  });

  it('skips a recipient suppressed through the API for the sender domain, not for another domain', async () => {
    await bed.create('other.example');
    const expires = new Date(bed.clock.now() + DAY).toISOString();
    expect((await bed.api('POST', suppressions, { body: { email: 'Blocked@example.org', domain: 'example.com', expires_at: expires } })).status).to.equal(201);
    expect((await bed.api('POST', suppressions, { body: { email: 'elsewhere@example.org', domain: 'other.example', expires_at: expires } })).status).to.equal(
      201,
    );
    const [blocked, fine] = await sendTo('blocked@example.org', 'elsewhere@example.org');
    await bed.until(blocked!, 'Suppressed');
    await bed.until(fine!, 'Delivered');
    expect(sink.received.map((r) => r.to[0])).to.deep.equal(['elsewhere@example.org']);

    // Once the suppression is deleted, the address is sent to again.
    expect((await bed.api('DELETE', `${suppressions}?email=blocked@example.org`)).status).to.equal(200);
    const [again] = await sendTo('blocked@example.org');
    await bed.until(again!, 'Delivered');
  });

  it("sends an RFC 3464 report to the domain's dsn_recipient, with a null return path and a DKIM signature", async () => {
    const put = await bed.api('PUT', `/v2/accounts/${bed.server.accountId}/domains/example.com`, { body: { dsn_recipient: 'postmaster@example.org' } });
    expect(put.status, JSON.stringify(put.body)).to.equal(200);
    sink.rcpt = (address) => (address === 'gone@example.org' ? { code: 550, text: '5.1.1 no such user' } : null);
    const [id] = await sendTo('gone@example.org');
    await bed.until(id!, 'Bounced');
    const [report] = await sink.waitFor(1);
    expect(report!.from).to.equal('');
    expect(report!.to).to.deep.equal(['postmaster@example.org']);
    expect((await verifyDkim(bed, report!.raw)).map((v) => v.result)).to.deep.equal(['pass']);

    const parsed = await simpleParser(report!.raw);
    const contentType = parsed.headers.get('content-type') as { value: string; params: Record<string, string> };
    expect(contentType.value).to.equal('multipart/report');
    expect(contentType.params['report-type']).to.equal('delivery-status');
    expect(parsed.from?.value[0]?.address).to.equal('mailer-daemon@example.com');
    expect(parsed.headers.get('auto-submitted')).to.equal('auto-replied');
    expect(parsed.text).to.contain('could not be delivered');
    const status = report!.raw.slice(report!.raw.indexOf('Content-Type: message/delivery-status'));
    expect(status).to.match(/Reporting-MTA: dns; mx\.postilion\.test/);
    expect(status).to.contain('Final-Recipient: rfc822; gone@example.org');
    expect(status).to.contain('Action: failed');
    expect(status).to.contain('Status: 5.1.1');
    expect(status).to.contain('Remote-MTA: dns; mx1.example.org');
    expect(status).to.contain('Diagnostic-Code: smtp; 550 5.1.1 no such user');
    expect(status).to.contain('Content-Type: text/rfc822-headers');
    expect(status).to.contain(`Message-ID: <${(await bed.read(id!)).id}@example.com>`);

    // The report is a message of its own in the read API, delivered and marked as a bounce notification.
    const listed = await bed.api('GET', `${bed.messages}?recipient=postmaster@example.org`);
    expect(listed.body.data).to.have.length(1);
    const dsn = await bed.until(listed.body.data[0].id, 'Delivered');
    expect(dsn.is_bounce_notification).to.equal(true);
    expect(dsn.sender).to.equal('mailer-daemon@example.com');
  });

  it('never reports on a report: a DSN that bounces gets no DSN of its own, and no DSN for sandbox mail', async () => {
    await bed.api('PUT', `/v2/accounts/${bed.server.accountId}/domains/example.com`, { body: { dsn_recipient: 'postmaster@example.org' } });
    sink.rcpt = () => ({ code: 550, text: '5.1.1 no such user' });
    const [id] = await sendTo('gone@example.org');
    await bed.until(id!, 'Bounced');
    const listed = async () => (await bed.api('GET', `${bed.messages}?recipient=postmaster@example.org`)).body.data as Array<{ id: string }>;
    await bed.until((await listed())[0]!.id, 'Bounced');
    // Give the engine time to (wrongly) queue a second report.
    await new Promise((r) => setTimeout(r, 300));
    expect(await listed()).to.have.length(1);

    const sandbox = await bed.send({ recipients: [{ email: 'x@example.org' }], sandbox: true, sandbox_result: 'bounce' });
    await bed.until(sandbox.body.data[0].id, 'Sandbox Bounced');
    await new Promise((r) => setTimeout(r, 200));
    expect(await listed()).to.have.length(1);
  });

  it('reports a message that expired before it could be tried, with status 4.4.7', async () => {
    await bed.api('PUT', `/v2/accounts/${bed.server.accountId}/domains/example.com`, { body: { dsn_recipient: 'postmaster@example.org' } });
    const at = (ms: number) => new Date(bed.clock.now() + ms).toISOString();
    const res = await bed.send({ recipients: [{ email: 'late@example.org' }], schedule: { first_attempt: at(60_000), expires: at(120_000) } });
    const id = res.body.data[0].id as string;
    bed.clock.advance(200_000);
    await bed.server.daemon.parts.jobs.engine.wake();
    const failed = await bed.until(id, 'Failed');
    expect(failed.bounce_classification).to.equal('MessageExpired');
    const [report] = await sink.waitFor(1);
    expect(report!.to).to.deep.equal(['postmaster@example.org']);
    expect(report!.raw).to.contain('Final-Recipient: rfc822; late@example.org');
    expect(report!.raw).to.contain('Status: 4.4.7');
    expect(await suppressed('late@example.org')).to.have.length(0);
  });

  it('sends no report when the domain has no dsn_recipient', async () => {
    sink.rcpt = () => ({ code: 550, text: '5.1.1 no such user' });
    const [id] = await sendTo('gone@example.org');
    await bed.until(id!, 'Bounced');
    await new Promise((r) => setTimeout(r, 200));
    expect((await bed.api('GET', bed.messages)).body.data).to.have.length(1);
  });
});
