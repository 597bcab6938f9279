import { expect } from 'chai';
import { generate } from 'selfsigned';
import { verifyDkim } from '../../helpers/domains.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * The delivery engine against real smtp-server sinks on loopback acting as MX hosts, found
 * through a real DNS server on loopback.
 */
/** The tests poll the read API on a clock that stands still: the token bucket must not run dry. */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };

/** The API UUID of a created message (the create response gives the Message-ID). */
const uuidOf = (messageId: string) => messageId.slice(1, messageId.indexOf('@'));

describe('delivery to MX hosts', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let second: SmtpSink | null = null;

  async function setUp(options: { tls?: { key: string; cert: string }; config?: Record<string, unknown> } = {}) {
    sink = await startSink(options.tls ? { tls: options.tls } : {});
    bed = await startMessageBed({ ...POLLING, delivery: { enabled: true, mx_port: sink.port, ...options.config } });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
  }

  afterEach(async () => {
    await bed?.stop();
    await sink?.close();
    await second?.close();
    second = null;
  });

  async function sendOne(to = 'rcpt@example.org') {
    const res = await bed.send({ recipients: [{ email: to }] });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.data[0].id as string;
  }

  it('delivers to the MX host with a VERP return path and a DKIM signature that verifies; the API shows Delivered', async () => {
    await setUp();
    const id = await sendOne();
    const [got] = await sink.waitFor(1);
    expect(got!.to).to.deep.equal(['rcpt@example.org']);
    // The token is the message id and a MAC under the server's VERP key: unforgeable.
    expect(got!.from).to.match(new RegExp(`^bounces\\+${uuidOf(id).replace(/-/g, '')}[0-9a-f]{16}@rp\\.example\\.com$`));
    expect(bed.server.daemon.core.verp.messageId(got!.from.slice('bounces+'.length, got!.from.indexOf('@')))).to.equal(uuidOf(id));
    const verified = await verifyDkim(bed, got!.raw);
    expect(verified.map((v) => v.result)).to.deep.equal(['pass']);
    const message = await bed.until(id, 'Delivered');
    expect(message.num_attempts).to.equal(1);
    expect(message.delivered_at).to.be.a('string');
    expect(message.sent_at).to.be.a('string');
    expect(message.delivery_attempts[0].status).to.equal('Delivered');
    expect(message.delivery_attempts[0].log).to.match(/^mx1\.example\.org: 250 /);
    expect(message.bounce_classification).to.equal('');
  });

  it('defers a 451, retries after the computed delay, then delivers', async () => {
    await setUp();
    sink.rcpt = (_address, attempt) => (attempt === 1 ? { code: 451, text: '4.7.1 Greylisted, try again later' } : null);
    const id = await sendOne();
    const deferred = await bed.until(id, 'Deferred');
    expect(deferred.delivery_attempts[0].log).to.contain('451 4.7.1 Greylisted');
    expect(sink.received).to.have.length(0);
    // First retry: 300 s ± 20 %. Nothing happens before it is due…
    bed.clock.advance(200_000);
    await bed.server.daemon.parts.jobs.engine.wake();
    expect((await bed.read(id)).status).to.equal('Deferred');
    // …and it is delivered once it is.
    bed.clock.advance(200_000);
    await bed.server.daemon.parts.jobs.engine.wake();
    const delivered = await bed.until(id, 'Delivered');
    expect(delivered.num_attempts).to.equal(2);
    expect(delivered.delivery_attempts.map((a: { status: string }) => a.status)).to.deep.equal(['Deferred', 'Delivered']);
  });

  it('bounces the recipient refused with 550 5.1.1 and delivers to the other', async () => {
    await setUp();
    sink.rcpt = (address) => (address === 'gone@example.org' ? { code: 550, text: '5.1.1 The email account that you tried to reach does not exist' } : null);
    const res = await bed.send({ recipients: [{ email: 'gone@example.org' }, { email: 'here@example.org' }] });
    const [gone, here] = res.body.data.map((d: { id: string }) => d.id) as [string, string];
    const bounced = await bed.until(gone, 'Bounced');
    expect(bounced.bounce_classification).to.equal('InvalidRecipient');
    expect(bounced.delivery_attempts[0].log).to.contain('550 5.1.1');
    await bed.until(here, 'Delivered');
    expect(sink.received.map((r) => r.to[0])).to.deep.equal(['here@example.org']);
  });

  it('classifies 5xx replies by their enhanced code and text', async () => {
    await setUp();
    const replies: Record<string, { code: number; text: string }> = {
      'policy@example.org': { code: 554, text: '5.7.1 Message rejected as spam' },
      'full@example.org': { code: 552, text: '5.2.2 Mailbox full' },
      'disabled@example.org': { code: 550, text: '5.2.1 This mailbox is disabled' },
    };
    sink.rcpt = (address) => replies[address] ?? null;
    const res = await bed.send({ recipients: Object.keys(replies).map((email) => ({ email })) });
    const [policy, full, disabled] = res.body.data.map((d: { id: string }) => d.id) as string[];
    expect((await bed.until(policy!, 'Bounced')).bounce_classification).to.equal('PolicyRelated');
    expect((await bed.until(disabled!, 'Bounced')).bounce_classification).to.equal('InactiveMailbox');
    // bounce-rules moves a full mailbox to a retry, though its code is 5xx.
    expect((await bed.until(full!, 'Deferred')).delivery_attempts[0].log).to.contain('552 5.2.2');
  });

  it('reuses the connection to an MX host for consecutive messages, and drops it after a refused recipient', async () => {
    await setUp({ config: { per_destination: 1 } });
    sink.rcpt = (address) => (address === 'gone@example.org' ? { code: 550, text: '5.1.1 no such user' } : null);
    const res = await bed.send({ recipients: ['a', 'b', 'gone', 'c'].map((n) => ({ email: `${n}@example.org` })) });
    const ids = res.body.data.map((d: { id: string }) => d.id) as string[];
    for (const [i, id] of ids.entries()) await bed.until(id, i === 2 ? 'Bounced' : 'Delivered');
    expect(sink.received.map((r) => r.to[0])).to.deep.equal(['a@example.org', 'b@example.org', 'c@example.org']);
    // A refused recipient is a failed transaction: that session is dropped, so two in all.
    expect(sink.connections).to.equal(2);
  });

  it('uses the next MX when the first does not answer', async () => {
    await setUp();
    second = await startSink({ host: '127.0.0.2', port: sink.port });
    bed.dns.zone.set('example.org', 'MX', [
      { exchange: 'down.example.org', priority: 5 },
      { exchange: 'mx2.example.org', priority: 20 },
    ]);
    bed.dns.zone.set('down.example.org', 'A', ['127.0.0.3']);
    bed.dns.zone.set('mx2.example.org', 'A', ['127.0.0.2']);
    const id = await sendOne();
    await second.waitFor(1);
    const message = await bed.until(id, 'Delivered');
    expect(message.delivery_attempts[0].log).to.match(/^mx2\.example\.org: 250 /);
  });

  it('bounces mail for a domain with a null MX without connecting anywhere', async () => {
    await setUp();
    bed.dns.zone.set('nomail.example.org', 'MX', [{ exchange: '.', priority: 0 }]);
    const id = await sendOne('someone@nomail.example.org');
    const message = await bed.until(id, 'Bounced');
    expect(message.bounce_classification).to.equal('BadDomain');
    expect(message.delivery_attempts[0].log).to.contain('null MX');
    expect(sink.received).to.have.length(0);
  });

  it('delivers over STARTTLS to a sink with a self-signed certificate', async () => {
    const pems = await generate([{ name: 'commonName', value: 'mx1.example.org' }], { keySize: 2048, algorithm: 'sha256' });
    await setUp({ tls: { key: pems.private, cert: pems.cert } });
    const id = await sendOne();
    const [got] = await sink.waitFor(1);
    expect(got!.secure).to.equal(true);
    await bed.until(id, 'Delivered');
  });

  it('defers rather than sends in clear when TLS is required and the host has none', async () => {
    await setUp({ config: { transport: { 'example.org': { host: '127.0.0.1', tls: 'required' } } } });
    // The transport map names the host; its port is the sink's.
    await bed.stop();
    bed = await startMessageBed({
      ...POLLING,
      delivery: { enabled: true, transport: { 'example.org': { host: '127.0.0.1', port: sink.port, tls: 'required' } } },
    });
    const id = await sendOne();
    const message = await bed.until(id, 'Deferred');
    expect(message.delivery_attempts[0].log).to.match(/TLS/);
    expect(sink.received).to.have.length(0);
  });

  it('plays out sandbox results without sending', async () => {
    await setUp();
    const res = await bed.send({ recipients: [{ email: 'a@example.org' }], sandbox: true, sandbox_result: 'bounce' });
    const id = res.body.data[0].id as string;
    const message = await bed.until(id, 'Sandbox Bounced');
    expect(message.bounce_classification).to.equal('InvalidRecipient');
    expect(sink.received).to.have.length(0);
  });
});
