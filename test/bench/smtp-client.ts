/**
 * Micro-benchmark: CPU of this process per message sent over one reused SMTP session to a sink on
 * loopback (Postfix's smtp-sink, a process of its own, offering PIPELINING), side by side:
 * - nodemailer: nodemailer's SMTPConnection driven as SmtpPool drove it before our own client
 *   (the parts of the message through a Readable, one recipient per transaction);
 * - pool: SmtpPool.send, the delivery path (our SmtpClient, session parked and taken back).
 *
 * The message is what the deliverer hands over for bench:deliver's 5 KB HTML receipt: a
 * DKIM-Signature field and the message as nodemailer's MailComposer makes it, as two Buffers. Messages go one after another (one in flight), so
 * the figure is CPU per message, not a rate. Each mode runs BENCH_RUNS times (5) after a warm-up;
 * the median is printed.
 *
 *   node --import tsx test/bench/smtp-client.ts
 *
 * Knobs (environment): BENCH_MESSAGES (3000 per run), BENCH_RUNS (5), BENCH_MODES (nodemailer,pool),
 * BENCH_CRLF=1 (the body in CRLF lines, as our own composer stores it).
 * Figures, not pass/fail; loopback only; needs smtp-sink (Debian package `postfix`).
 */
import MailComposer from 'nodemailer/lib/mail-composer';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { Hop } from '../../src/delivery/router.ts';
import { SmtpPool } from '../../src/delivery/smtp-pool.ts';
import { chunksStream } from '../../src/util/chunks-stream.ts';
import { smtpSinkPath, startPostfixSink } from './deliver-sink.ts';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 3000);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const MODES = (process.env.BENCH_MODES ?? 'nodemailer,pool').split(',');
/** BENCH_CRLF=1: the body with CRLF line ends, as a composer of ours would store it (nothing for the data encoding to change). */
const CRLF = process.env.BENCH_CRLF === '1';

/** What the deliverer hands over for bench:deliver's message: the DKIM-Signature field, then the composed message. */
async function message(): Promise<Buffer[]> {
  const header = Buffer.from(
    `DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.com; q=dns/txt; s=s1;\r\n bh=${'b'.repeat(44)};\r\n h=From:To:Subject:Date:Message-ID:MIME-Version:Content-Type;\r\n b=${'x'.repeat(70)}\r\n ${'x'.repeat(70)}\r\n ${'x'.repeat(70)}\r\n ${'x'.repeat(130)}\r\n`,
  );
  // bench:deliver's receipt: nodemailer composes it 7bit with the HTML's own (bare LF) line ends.
  const lines = ['<!doctype html><html><body><h1>Thanks for your order</h1><p>Here is your receipt.</p><ul>'];
  for (let i = 1; lines.join('').length < 5 * 1024 - 200; i++) lines.push(`<li>Item ${i}: widget no. ${(i * 7907) % 1000}, $${(i * 2.39).toFixed(2)}</li>`);
  lines.push('</ul><p>Questions? <a href="https://example.com/help">Ask us</a>.</p></body></html>');
  const composer = new MailComposer({ from: 'Shop <shop@example.com>', to: 'rcpt@example.org', subject: 'Your receipt', html: lines.join('\n') });
  const body = await composer.compile().build();
  return [header, CRLF ? Buffer.from(body.toString('latin1').replace(/\r?\n/g, '\r\n'), 'latin1') : body];
}

type Send = (to: string, parts: Buffer[]) => Promise<void>;

async function nodemailerSender(port: number): Promise<{ send: Send; close(): void }> {
  const connection = new SMTPConnection({ host: '127.0.0.1', port, name: 'bench.example.com', secure: false, ignoreTLS: true });
  connection.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => connection.connect((err?: Error) => (err ? reject(err) : resolve())));
  const send: Send = (to, parts) =>
    new Promise<void>((resolve, reject) =>
      connection.send({ from: 'bounces@example.com', to: [to] }, chunksStream(parts), (err) => (err ? reject(err) : resolve())),
    );
  return { send, close: () => connection.quit() };
}

function poolSender(port: number): { send: Send; close(): void } {
  const pool = new SmtpPool({
    hostname: 'bench.example.com',
    messagesPerConnection: 1e9,
    idleTimeoutMs: 60_000,
    connectTimeoutMs: 10_000,
    commandTimeoutMs: 30_000,
    tlsRejectUnauthorized: false,
  });
  const hop: Hop = { name: '127.0.0.1', address: '127.0.0.1', port, tls: 'off' };
  const send: Send = async (to, parts) => {
    const reply = await pool.send(hop, 'bounces@example.com', to, parts);
    if (reply.kind !== 'reply' || reply.code !== 250) throw new Error(`unexpected reply ${JSON.stringify(reply)}`);
  };
  return { send, close: () => pool.close() };
}

async function measure(send: Send, parts: Buffer[], n: number): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < n; i++) await send(`rcpt${i}@example.org`, parts);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const path = smtpSinkPath();
  if (!path) throw new Error('smtp-sink is not installed (Debian package postfix)');
  const sink = await startPostfixSink(path);
  const parts = await message();
  console.log(`sink: ${sink.name}; message ${parts.reduce((n, p) => n + p.length, 0)} bytes in ${parts.length} parts; ${MESSAGES} messages x ${RUNS} runs`);
  try {
    for (const mode of MODES) {
      const sender = mode === 'nodemailer' ? await nodemailerSender(sink.port) : poolSender(sink.port);
      await measure(sender.send, parts, Math.min(2000, MESSAGES));
      const figures: number[] = [];
      for (let run = 0; run < RUNS; run++) figures.push(await measure(sender.send, parts, MESSAGES));
      sender.close();
      console.log(`${mode.padEnd(12)} ${median(figures).toFixed(1)} µs CPU per message (median; runs ${figures.map((f) => f.toFixed(1)).join(', ')})`);
    }
  } finally {
    await sink.close();
  }
}

await main();
