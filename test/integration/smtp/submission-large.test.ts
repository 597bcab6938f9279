import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { createTransport } from 'nodemailer';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { RawSmtp, plainToken } from '../../helpers/raw-smtp.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * Large submitted messages are written to the store as they arrive (synced chunks of 1 MiB), not
 * held whole in memory: they are delivered byte for byte, and what was written of a refused one
 * is deleted.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };

describe('SMTP submission of large messages', function () {
  this.timeout(60_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let credential: { username: string; password: string };
  let port: number;

  before(async () => {
    sink = await startSink();
    bed = await startMessageBed({
      ...POLLING,
      delivery: { enabled: true, mx_port: sink.port },
      smtp: { submission: { enabled: true, plain_auth_from: ['127.0.0.1/32'], max_message_bytes: 6 * 1024 * 1024 } },
    });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    port = bed.server.daemon.parts.submission.ports.find((p) => !p.secure)!.port;
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/smtp-credentials`, { body: { name: 'big', scope: 'global' } });
    credential = { username: res.body.username, password: res.body.password };
  });
  after(async () => {
    await bed?.stop();
    await sink?.close();
  });

  const bodyChunks = async () => (await bed.server.daemon.core.store.families.bodies.keys().all()).length;

  /** A message of about `mib` MiB: text lines (CRLF, or LF only). */
  function bigMessage(mib: number, eol = '\r\n'): { raw: string; bodyDigest: string } {
    const line = 'x'.repeat(76);
    const lines: string[] = [];
    for (let i = 0; lines.length * 78 < mib * 1024 * 1024; i++) lines.push(`${i.toString().padStart(8, '0')} ${line.slice(9)}`);
    const body = lines.join('\r\n') + '\r\n';
    const head = ['From: App <app@example.com>', 'To: rcpt@example.org', 'Subject: big one', 'MIME-Version: 1.0', 'Content-Type: text/plain'].join(eol);
    return { raw: `${head}${eol}${eol}${eol === '\r\n' ? body : body.replace(/\r\n/g, '\n')}`, bodyDigest: createHash('sha256').update(body).digest('hex') };
  }

  /** One transaction with a bare client; the DATA reply. Dot-stuffing is not needed: no line starts with a dot. */
  async function send(raw: string): Promise<{ code: number; text: string }> {
    const { client: smtp } = await RawSmtp.open(port, { localAddress: '127.0.0.1' });
    try {
      await smtp.command('EHLO client.test');
      expect((await smtp.command(`AUTH PLAIN ${plainToken(credential.username, credential.password)}`)).code).to.equal(235);
      await smtp.command('MAIL FROM:<app@example.com>');
      await smtp.command('RCPT TO:<rcpt@example.org>');
      expect((await smtp.command('DATA')).code).to.equal(354);
      // The terminating dot needs CRLF before it: a bare-LF message gets it as its last line end.
      smtp.write(raw.endsWith('\r\n') ? raw : raw.endsWith('\n') ? `${raw.slice(0, -1)}\r\n` : `${raw}\r\n`);
      const reply = await smtp.command('.');
      return { code: reply.code, text: reply.raw };
    } finally {
      smtp.close();
    }
  }

  const bodyOf = (raw: string) => raw.slice(raw.indexOf('\r\n\r\n') + 4);

  for (const [what, eol] of [
    ['CRLF', '\r\n'],
    ['bare LF', '\n'],
  ] as const) {
    it(`a 5 MiB message (${what} line ends) is spooled, delivered byte for byte and DKIM-signed`, async () => {
      sink.received.length = 0;
      const { raw, bodyDigest } = bigMessage(5, eol);
      const before = await bodyChunks();
      const answer = await send(raw);
      expect(answer.code, answer.text).to.equal(250);
      // Written as it came: 1 MiB chunks, plus the header block and the tail.
      expect((await bodyChunks()) - before).to.be.at.least(5);
      const [got] = await sink.waitFor(1, 20_000);
      expect(createHash('sha256').update(bodyOf(got!.raw)).digest('hex')).to.equal(bodyDigest);
      expect(got!.raw).to.match(/^DKIM-Signature: /m);
      expect(got!.raw).to.contain('Subject: big one');
    });
  }

  it('a small message is unchanged by the spool (one batch, nothing written before the 250)', async () => {
    sink.received.length = 0;
    const info = await createTransport({
      host: '127.0.0.1',
      port,
      secure: false,
      ignoreTLS: true,
      auth: { user: credential.username, pass: credential.password },
    }).sendMail({ from: 'app@example.com', to: 'rcpt@example.org', subject: 'small', text: 'hello' });
    expect(info.response).to.match(/^250 /);
    const [got] = await sink.waitFor(1, 20_000);
    expect(got!.raw).to.contain('hello');
  });

  it('refuses a message over max_message_bytes with 552 and deletes what was written of it', async () => {
    const before = await bodyChunks();
    const { raw } = bigMessage(7);
    const answer = await send(raw);
    expect(answer.code).to.equal(552);
    expect(answer.text).to.contain('Message too big');
    expect(await bodyChunks()).to.equal(before);
  });

  it('refuses a header block over 1 MiB with 552, and one without a From with 550, deleting what was written', async () => {
    const before = await bodyChunks();
    // Lines of lawful length (a longer one is refused for itself: conformance.test.ts).
    const hugeHeader = `From: App <app@example.com>\r\n${`X-Pad: ${'a'.repeat(70)}\r\n`.repeat(16_000)}\r\nbody\r\n`;
    const tooBig = await send(hugeHeader);
    expect(tooBig.code).to.equal(552);
    expect(tooBig.text).to.contain('header block is larger than 1 MiB');
    const noFrom = await send(`To: rcpt@example.org\r\nSubject: x\r\n\r\n${`${'y'.repeat(76)}\r\n`.repeat(28_000)}`);
    expect(noFrom.code).to.equal(550);
    expect(noFrom.text).to.contain('no From header');
    expect(await bodyChunks()).to.equal(before);
  });

  it('deletes what was written of a message whose connection is lost in the middle of DATA', async () => {
    const before = await bodyChunks();
    const { client: smtp } = await RawSmtp.open(port, { localAddress: '127.0.0.1' });
    await smtp.command('EHLO client.test');
    await smtp.command(`AUTH PLAIN ${plainToken(credential.username, credential.password)}`);
    await smtp.command('MAIL FROM:<app@example.com>');
    await smtp.command('RCPT TO:<rcpt@example.org>');
    await smtp.command('DATA');
    smtp.write(bigMessage(4).raw);
    const deadline = Date.now() + 10_000;
    while ((await bodyChunks()) - before < 2) {
      if (Date.now() > deadline) throw new Error('nothing was spooled');
      await new Promise((r) => setTimeout(r, 20));
    }
    smtp.close();
    while ((await bodyChunks()) !== before) {
      if (Date.now() > deadline) throw new Error(`${(await bodyChunks()) - before} chunks of the lost message are left`);
      await new Promise((r) => setTimeout(r, 20));
    }
  });
});
