/**
 * Micro-benchmark: CPU of this process per message sent over one reused SMTP session to a sink on
 * loopback (Postfix's smtp-sink, a process of its own, offering PIPELINING), side by side:
 * - nodemailer: nodemailer's SMTPConnection driven as SmtpPool drove it before our own client
 *   (the parts of the message through a Readable, one recipient per transaction);
 * - pool: SmtpPool.send, the delivery path (our SmtpClient, session parked and taken back).
 *
 * The message is what the deliverer hands over: a DKIM-Signature header part and a 5 KB body in
 * CRLF lines of 76 characters, as two Buffers. Messages go one after another (one in flight), so
 * the figure is CPU per message, not a rate. Each mode runs BENCH_RUNS times (5) after a warm-up;
 * the median is printed.
 *
 *   node --import tsx test/bench/smtp-client.ts
 *
 * Knobs (environment): BENCH_MESSAGES (3000 per run), BENCH_RUNS (5), BENCH_MODES (nodemailer,pool).
 * Figures, not pass/fail; loopback only; needs smtp-sink (Debian package `postfix`).
 */
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { Hop } from '../../src/delivery/router.ts';
import { SmtpPool } from '../../src/delivery/smtp-pool.ts';
import { chunksStream } from '../../src/util/chunks-stream.ts';
import { smtpSinkPath, startPostfixSink } from './deliver-sink.ts';

const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 3000);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const MODES = (process.env.BENCH_MODES ?? 'nodemailer,pool').split(',');

function message(): Buffer[] {
  const header = Buffer.from(
    `DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.com; q=dns/txt; s=s1;\r\n bh=${'b'.repeat(44)};\r\n h=From:To:Subject:Date:Message-ID:MIME-Version:Content-Type;\r\n b=${'x'.repeat(70)}\r\n ${'x'.repeat(70)}\r\n ${'x'.repeat(70)}\r\n ${'x'.repeat(130)}\r\n`,
  );
  const lines = [
    'From: Sender <sender@example.com>',
    'To: rcpt@example.org',
    'Subject: A message of about five kilobytes',
    'Date: Fri, 27 Nov 2026 12:00:00 +0000',
    'Message-ID: <0123456789abcdef@example.com>',
    'MIME-Version: 1.0',
    'Content-Type: text/html; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
    '',
  ];
  while (lines.join('\r\n').length < 5000) lines.push(`<p>Hello=2C this is line ${lines.length} of the message body, padded to seventy-six charac=`);
  return [header, Buffer.from(lines.join('\r\n') + '\r\n')];
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
  const parts = message();
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
