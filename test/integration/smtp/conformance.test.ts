import { expect } from 'chai';
import { call } from '../../helpers/harness.ts';
import { startMessageBed, SENDER_DOMAIN, type MessageBed } from '../../helpers/messages.ts';
import { RawSmtp, plainToken, type SmtpReply } from '../../helpers/raw-smtp.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/**
 * SMTP conformance and robustness of both listeners (submission and the inbound MX), on real
 * sockets: enhanced status codes, the greeting, deadlines against slow-drip clients, line length
 * and NUL in DATA, SMTPUTF8 end to end (to a sink that offers it and to one that does not), and
 * what a client leaving in DATA is logged as.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const COMMAND_DEADLINE_S = 1.5;
const DATA_DEADLINE_S = 2;
/** A reply text that begins with an enhanced status code (RFC 3463), and one that has two. */
const ENHANCED = /^[245]\.\d{1,3}\.\d{1,3} /;
const TWICE = /^[245]\.\d{1,3}\.\d{1,3} [245]\.\d{1,3}\.\d{1,3} /;

describe('SMTP conformance: enhanced codes, deadlines, line length, SMTPUTF8', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let asciiSink: SmtpSink;
  let receiver: WebhookReceiver;
  let credential: { username: string; password: string };
  let submissionPort: number;
  let inboundPort: number;
  const logLines: string[] = [];
  const open: RawSmtp[] = [];

  before(async () => {
    sink = await startSink();
    asciiSink = await startSink({ hideSmtpUtf8: true });
    receiver = await WebhookReceiver.start();
    bed = await startMessageBed(
      {
        ...POLLING,
        delivery: { enabled: true, mx_port: sink.port, transport: { 'ascii.example': { host: '127.0.0.1', port: asciiSink.port } } },
        smtp: {
          command_deadline_seconds: COMMAND_DEADLINE_S,
          data_deadline_seconds: DATA_DEADLINE_S,
          submission: { enabled: true },
          inbound: { enabled: true, port: 0 },
        },
        webhooks: { allow_networks: ['127.0.0.0/8'] },
      },
      SENDER_DOMAIN,
      { logLines },
    );
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('xn--exmple-cua.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    submissionPort = bed.server.daemon.parts.submission.ports.find((p) => !p.secure)!.port;
    inboundPort = bed.server.daemon.parts.inbound.port!;
    const created = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/smtp-credentials`, { body: { name: 'app', scope: 'global' } });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    credential = { username: created.body.username, password: created.body.password };
    const route = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/routes`, {
      body: { name: 'all', url: receiver.url('/in'), recipient: `*@${SENDER_DOMAIN}` },
    });
    expect(route.status, JSON.stringify(route.body)).to.equal(201);
    receiver.secrets.set('/in', route.body.secret);
  });
  after(async () => {
    for (const c of open) c.close();
    await bed?.stop();
    await sink?.close();
    await asciiSink?.close();
    await receiver?.stop();
  });
  beforeEach(() => {
    sink.received.length = 0;
    asciiSink.received.length = 0;
    logLines.length = 0;
  });

  async function connect(listener: 'submission' | 'inbound'): Promise<{ client: RawSmtp; greeting: SmtpReply }> {
    const opened = await RawSmtp.open(listener === 'submission' ? submissionPort : inboundPort, { localAddress: '127.0.0.1' });
    open.push(opened.client);
    return opened;
  }

  /** A submission session past EHLO and AUTH (in clear from loopback, which plain_auth_from allows). */
  async function submission(): Promise<RawSmtp> {
    const { client } = await connect('submission');
    expect((await client.command('EHLO client.test')).code).to.equal(250);
    expect((await client.command(`AUTH PLAIN ${plainToken(credential.username, credential.password)}`)).code).to.equal(235);
    return client;
  }

  async function inbound(): Promise<RawSmtp> {
    const { client } = await connect('inbound');
    expect((await client.command('EHLO client.test')).code).to.equal(250);
    return client;
  }

  /** DATA with `body` (a whole message, CRLF lines, dot-stuffed by the caller) and its reply. */
  async function data(client: RawSmtp, body: string): Promise<SmtpReply> {
    expect((await client.command('DATA')).code).to.equal(354);
    client.write(`${body}\r\n.\r\n`);
    return client.read();
  }

  const message = (subject: string, extra = '') => `From: app@${SENDER_DOMAIN}\r\nTo: someone@example.org\r\nSubject: ${subject}\r\n${extra}\r\nHello.`;

  const queuedId = (reply: SmtpReply) => /queued as ([0-9a-f-]{36})/.exec(reply.raw)?.[1] ?? '';

  /**
   * Polls a message until it reaches `status`, outside the contract check: the contract's
   * `format: email` is ASCII only, and an SMTPUTF8 recipient is not (see the report of issue 31).
   */
  async function until(id: string, status: string): Promise<{ recipient: string; delivery_attempts: Array<{ log: string }> }> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const res = await call(bed.server, 'GET', `${bed.messages}/${id}`, { operationId: null });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      if (res.body.status === status) return res.body;
      if (Date.now() > deadline) throw new Error(`message ${id} is ${res.body.status}, not ${status}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Parsed JSON log lines written since the test began. */
  const logs = () => logLines.map((l) => JSON.parse(l) as { level: string; msg: string; err?: { stack?: string } });
  const loud = () => logs().filter((l) => l.level !== 'info' && l.level !== 'debug');

  async function logged(pattern: RegExp, timeoutMs = 5000): Promise<{ level: string; msg: string; err?: unknown }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = logs().find((l) => pattern.test(l.msg));
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no log line matching ${pattern}: ${logLines.join('\n')}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  describe('greeting and enhanced status codes (RFC 2034)', () => {
    for (const listener of ['submission', 'inbound'] as const) {
      it(`${listener}: says ESMTP once in the greeting and lists ENHANCEDSTATUSCODES and SMTPUTF8 in EHLO`, async () => {
        const { client, greeting } = await connect(listener);
        expect(greeting.code).to.equal(220);
        expect(greeting.raw.match(/ESMTP/g)).to.have.length(1);
        const ehlo = await client.command('EHLO client.test');
        expect(ehlo.lines).to.include('ENHANCEDSTATUSCODES');
        expect(ehlo.lines).to.include('SMTPUTF8');
        client.close();
      });
    }

    it('submission: every reply of a session, refusals included, carries one x.y.z code (but EHLO, 334 and 354)', async () => {
      const { client } = await connect('submission');
      await client.command('EHLO client.test');
      const replies: SmtpReply[] = [];
      const say = async (line: string) => {
        const reply = await client.command(line);
        replies.push(reply);
        return reply;
      };
      expect((await say('MAIL FROM:<app@example.com>')).code).to.equal(530);
      expect((await say(`AUTH PLAIN ${plainToken(credential.username, 'wrong')}`)).code).to.equal(535);
      expect((await say(`AUTH PLAIN ${plainToken(credential.username, credential.password)}`)).code).to.equal(235);
      expect((await say('DATA')).code).to.equal(503);
      expect((await say('MAIL FROM:<app@not-ours.test>')).code).to.equal(550);
      expect((await say('MAIL FROM:<app@example.com>')).code).to.equal(250);
      expect((await say('RCPT TO:<not an address>')).code).to.be.within(500, 599);
      expect((await say('RCPT TO:<a@b>')).code).to.equal(553);
      expect((await say('RCPT TO:<rcpt@example.org>')).code).to.equal(250);
      expect((await say('FOO')).code).to.equal(500);
      expect((await say('NOOP')).code).to.equal(250);
      expect((await say('VRFY rcpt')).code).to.equal(252);
      const accepted = await data(client, message('Codes'));
      expect(accepted.code).to.equal(250);
      replies.push(accepted);
      expect((await say('RSET')).code).to.equal(250);
      expect((await say('QUIT')).code).to.equal(221);
      for (const reply of replies) {
        for (const line of reply.lines) {
          expect(line, reply.raw).to.match(ENHANCED);
          expect(line, reply.raw).to.not.match(TWICE);
        }
      }
    });

    it('inbound: every reply of a session, refusals included, carries one x.y.z code', async () => {
      const client = await inbound();
      const replies = [
        await client.command('RCPT TO:<help@example.com>'),
        await client.command('MAIL FROM:<c@example.net>'),
        await client.command('RCPT TO:<someone@elsewhere.test>'),
        await client.command('RCPT TO:<help@example.com>'),
        await data(client, 'From: c@example.net\r\nSubject: Help\r\n\r\nHelp.'),
        await client.command('QUIT'),
      ];
      expect(replies.map((r) => r.code)).to.deep.equal([503, 250, 550, 250, 250, 221]);
      for (const reply of replies) {
        for (const line of reply.lines) {
          expect(line, reply.raw).to.match(ENHANCED);
          expect(line, reply.raw).to.not.match(TWICE);
        }
      }
    });
  });

  describe('deadlines (slow-drip clients)', () => {
    /** Writes `text` one byte every `everyMs` until the server closes; the reply it sent and when. */
    async function drip(client: RawSmtp, text: string, everyMs: number): Promise<{ reply: SmtpReply; ms: number }> {
      const started = Date.now();
      const reply = client.read();
      let stop = false;
      void (async () => {
        for (const ch of text) {
          if (stop) return;
          client.write(ch);
          await new Promise((r) => setTimeout(r, everyMs));
        }
      })();
      try {
        return { reply: await reply, ms: Date.now() - started };
      } finally {
        stop = true;
      }
    }

    for (const listener of ['submission', 'inbound'] as const) {
      it(`${listener}: closes a command line dripped one byte at a time with 421 4.4.2 at the command deadline`, async () => {
        const { client } = await connect(listener);
        // Each byte comes well within the idle timeout; the line never ends in time.
        const { reply, ms } = await drip(client, `EHLO ${'a'.repeat(100)}\r\n`, 200);
        expect(reply.code).to.equal(421);
        expect(reply.lines[0]).to.match(/^4\.4\.2 .*timeout/i);
        expect(ms).to.be.within(COMMAND_DEADLINE_S * 1000 - 100, COMMAND_DEADLINE_S * 1000 + 2000);
        await client.whenClosed();
      });
    }

    it('inbound: a command deadline is per line, so a session of quick lines with pauses between them lives on', async () => {
      const client = await inbound();
      await new Promise((r) => setTimeout(r, COMMAND_DEADLINE_S * 1000 + 300));
      expect((await client.command('NOOP')).code).to.equal(250);
      await new Promise((r) => setTimeout(r, COMMAND_DEADLINE_S * 1000 + 300));
      expect((await client.command('MAIL FROM:<c@example.net>')).code).to.equal(250);
      client.close();
    });

    it('inbound: closes a DATA dripped line by line with 421 4.4.2 at the DATA deadline; stores nothing; an info line without a stack', async () => {
      const client = await inbound();
      await client.command('MAIL FROM:<c@example.net>');
      expect((await client.command('RCPT TO:<help@example.com>')).code).to.equal(250);
      expect((await client.command('DATA')).code).to.equal(354);
      const before = receiver.received.length;
      const { reply, ms } = await drip(client, 'Subject: slow\r\n\r\n' + 'line\r\n'.repeat(200), 20);
      expect(reply.code).to.equal(421);
      expect(reply.lines[0]).to.match(/^4\.4\.2 .*timeout/i);
      expect(ms).to.be.within(DATA_DEADLINE_S * 1000 - 100, DATA_DEADLINE_S * 1000 + 2000);
      await client.whenClosed();
      const line = await logged(/inbound DATA not completed/);
      expect(line.level).to.equal('info');
      expect(JSON.stringify(line)).to.not.contain('stack');
      expect(loud(), logLines.join('\n')).to.deep.equal([]);
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.received.length).to.equal(before);
    });
  });

  it('submission: a client that disconnects in DATA is an info line without a stack, never an error', async () => {
    const client = await submission();
    await client.command('MAIL FROM:<app@example.com>');
    await client.command('RCPT TO:<rcpt@example.org>');
    expect((await client.command('DATA')).code).to.equal(354);
    client.write('Subject: half\r\n\r\nthe first half of');
    await new Promise((r) => setTimeout(r, 100));
    client.close();
    const line = await logged(/SMTP DATA not completed/);
    expect(line.level).to.equal('info');
    expect(JSON.stringify(line)).to.not.contain('stack');
    await new Promise((r) => setTimeout(r, 200));
    expect(loud(), logLines.join('\n')).to.deep.equal([]);
    expect(sink.received).to.deep.equal([]);
  });

  describe('line length and NUL (RFC 5321 §4.5.3.1.6, RFC 5322 §2.3): refused, never forwarded', () => {
    it('submission: refuses a 1 MiB header line with 554 5.6.0 and sends nothing; the session goes on', async () => {
      const client = await submission();
      await client.command('MAIL FROM:<app@example.com>');
      await client.command('RCPT TO:<rcpt@example.org>');
      const reply = await data(client, message('Long', `X-Long: ${'a'.repeat(1024 * 1024)}\r\n`));
      expect(reply.code).to.equal(554);
      expect(reply.lines[0]).to.match(/^5\.6\.0 .*line 4 is longer than 998 octets/);
      expect((await client.command('NOOP')).code).to.equal(250);
      client.close();
      await new Promise((r) => setTimeout(r, 300));
      expect(sink.received).to.deep.equal([]);
    });

    it('submission: refuses a NUL in the body with 554 5.6.0', async () => {
      const client = await submission();
      await client.command('MAIL FROM:<app@example.com>');
      await client.command('RCPT TO:<rcpt@example.org>');
      const reply = await data(client, `${message('Nul')}\r\nbinary \0 byte`);
      expect(reply.code).to.equal(554);
      expect(reply.lines[0]).to.match(/^5\.6\.0 .*NUL/);
      client.close();
    });

    it('submission: delivers a line of exactly 998 octets unchanged', async () => {
      const client = await submission();
      await client.command('MAIL FROM:<app@example.com>');
      await client.command('RCPT TO:<rcpt@example.org>');
      const long = 'b'.repeat(998);
      expect((await data(client, `${message('Exact')}\r\n${long}`)).code).to.equal(250);
      client.close();
      const [got] = await sink.waitFor(1);
      expect(got!.raw).to.contain(`\r\n${long}\r\n`);
    });

    it('inbound: refuses a 1 MiB header line and a NUL with 554 5.6.0, and posts nothing to the route', async () => {
      const client = await inbound();
      const before = receiver.received.length;
      await client.command('MAIL FROM:<c@example.net>');
      await client.command('RCPT TO:<help@example.com>');
      const long = await data(client, `From: c@example.net\r\nX-Long: ${'a'.repeat(1024 * 1024)}\r\n\r\nHelp.`);
      expect(long.code).to.equal(554);
      expect(long.lines[0]).to.match(/^5\.6\.0 .*line 2 is longer/);
      await client.command('MAIL FROM:<c@example.net>');
      await client.command('RCPT TO:<help@example.com>');
      const nul = await data(client, 'From: c@example.net\r\nSubject: a\0b\r\n\r\nHelp.');
      expect(nul.code).to.equal(554);
      expect(nul.lines[0]).to.match(/^5\.6\.0 .*NUL/);
      client.close();
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.received.length).to.equal(before);
    });
  });

  describe('SMTPUTF8 (RFC 6531)', () => {
    it('submission: refuses a UTF-8 recipient without the SMTPUTF8 parameter with 553 5.6.7', async () => {
      const client = await submission();
      expect((await client.command('MAIL FROM:<app@example.com>')).code).to.equal(250);
      const reply = await client.command('RCPT TO:<jürgen@example.org>');
      expect(reply.code).to.equal(553);
      expect(reply.lines[0]).to.match(/^5\.6\.7 .*SMTPUTF8/);
      // A UTF-8 sender likewise, unless its own MAIL FROM carries the parameter.
      expect((await client.command('RSET')).code).to.equal(250);
      const sender = await client.command('MAIL FROM:<jürgen@example.com>');
      expect(sender.code).to.equal(553);
      expect(sender.lines[0]).to.match(/^5\.6\.7 /);
      client.close();
    });

    it('submission: refuses under SMTPUTF8 too an address that is not valid UTF-8, a UTF-8 local part over 64 octets, and a bad IDN domain', async () => {
      const client = await submission();
      expect((await client.command('MAIL FROM:<app@example.com> SMTPUTF8')).code).to.equal(250);
      client.write(Buffer.from('RCPT TO:<j\xfcrgen@example.org>\r\n', 'latin1'));
      const latin1 = await client.read();
      expect(latin1.code).to.equal(553);
      expect(latin1.lines[0]).to.match(/^5\.1\.3 .*not valid UTF-8/);
      const long = await client.command(`RCPT TO:<${'ü'.repeat(33)}@example.org>`);
      expect(long.code).to.equal(553);
      expect(long.lines[0]).to.match(/^5\.1\.3 /);
      const badDomain = await client.command('RCPT TO:<jürgen@exa mple.org>');
      expect(badDomain.code).to.be.within(500, 599);
      expect(badDomain.lines[0]).to.match(ENHANCED);
      client.close();
    });

    it('submission: takes a UTF-8 recipient under SMTPUTF8 and delivers it with SMTPUTF8 to an MX that offers it', async () => {
      const client = await submission();
      expect((await client.command('MAIL FROM:<app@example.com> SMTPUTF8')).code).to.equal(250);
      expect((await client.command('RCPT TO:<jürgen@example.org>')).code).to.equal(250);
      const reply = await data(client, message('Grüße'));
      expect(reply.code).to.equal(250);
      client.close();
      const [got] = await sink.waitFor(1);
      expect(got!.to).to.deep.equal(['jürgen@example.org']);
      expect(got!.smtpUtf8).to.equal(true);
      expect((await until(queuedId(reply), 'Delivered')).recipient).to.equal('jürgen@example.org');
    });

    it('submission: fails a UTF-8 recipient permanently (5.6.7) when the next hop does not offer SMTPUTF8, sending it nothing', async () => {
      const client = await submission();
      await client.command('MAIL FROM:<app@example.com> SMTPUTF8');
      expect((await client.command('RCPT TO:<jürgen@ascii.example>')).code).to.equal(250);
      const reply = await data(client, message('No UTF-8 here'));
      expect(reply.code).to.equal(250);
      client.close();
      const bounced = await until(queuedId(reply), 'Bounced');
      expect(bounced.delivery_attempts[0]!.log).to.match(/5\.6\.7 next hop 127\.0\.0\.1 does not support SMTPUTF8/);
      expect(asciiSink.received).to.deep.equal([]);
    });

    it('submission: an IDN domain is looked up and sent as its A-label (ASCII), to any MX', async () => {
      const client = await submission();
      await client.command('MAIL FROM:<app@example.com> SMTPUTF8');
      expect((await client.command('RCPT TO:<user@exämple.org>')).code).to.equal(250);
      const reply = await data(client, message('IDN'));
      expect(reply.code).to.equal(250);
      client.close();
      // Only the A-label is in DNS; the sink (smtp-server) shows domains as U-labels whatever was
      // sent, but an address sent in UTF-8 would have made nodemailer add SMTPUTF8.
      const [got] = await sink.waitFor(1);
      expect(got!.to).to.deep.equal(['user@exämple.org']);
      expect(got!.smtpUtf8).to.equal(false);
      expect((await bed.until(queuedId(reply), 'Delivered')).recipient).to.equal('user@xn--exmple-cua.org');
    });

    it('inbound: refuses a UTF-8 recipient without SMTPUTF8 (553 5.6.7), takes it with SMTPUTF8 and forwards it to the route', async () => {
      const client = await inbound();
      await client.command('MAIL FROM:<c@example.net>');
      const refused = await client.command('RCPT TO:<jürgen@example.com>');
      expect(refused.code).to.equal(553);
      expect(refused.lines[0]).to.match(/^5\.6\.7 /);
      await client.command('RSET');
      expect((await client.command('MAIL FROM:<c@example.net> SMTPUTF8')).code).to.equal(250);
      expect((await client.command('RCPT TO:<jürgen@example.com>')).code).to.equal(250);
      expect((await data(client, 'From: c@example.net\r\nSubject: Grüße\r\n\r\nHallo.')).code).to.equal(250);
      client.close();
      await receiver.until((all) => all.some((d) => d.body.includes('jürgen@example.com')));
    });
  });
});
