import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import { generate } from 'selfsigned';
import { SMTPServer } from 'smtp-server';
import type { Hop } from '../../../src/delivery/router.ts';
import { SmtpClient, type SmtpError } from '../../../src/delivery/smtp-client.ts';
import { SmtpPool } from '../../../src/delivery/smtp-pool.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/** What a scripted server saw on one connection. */
interface Seen {
  /** The command lines of each read: a pipelined batch arrives as one read. */
  batches: string[][];
  /** The raw bytes of each message, as sent (stuffed), with the number of reads it took. */
  messages: Array<{ raw: Buffer; reads: number }>;
}

interface Script {
  /** The greeting; null: none at all. */
  greeting?: string | null;
  /** The EHLO keywords after the first line. */
  extensions?: string[];
  /** The reply to a command line (CRLF added); undefined: the usual one. */
  answer?: (verb: string, line: string, socket: Socket) => string | null | undefined;
  /** While the message comes in: 'drop' closes the connection at its first bytes, 'silent' never answers it. */
  during?: 'drop' | 'silent';
  /** The reply to the message. */
  final?: string;
}

/**
 * A raw SMTP server on loopback that answers as scripted and records each read, so that the
 * tests see how the client groups its writes (what smtp-server does not show).
 */
async function scripted(script: Script = {}) {
  const sessions: Seen[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    const seen: Seen = { batches: [], messages: [] };
    sessions.push(seen);
    let data: { chunks: Buffer[]; reads: number } | null = null;
    let buffered = Buffer.alloc(0);
    if (script.greeting !== null) socket.write(`${script.greeting ?? '220 scripted ESMTP'}\r\n`);
    socket.on('data', (chunk: Buffer) => {
      if (data) data.reads += 1;
      buffered = Buffer.concat([buffered, chunk]);
      const batch: string[] = [];
      for (;;) {
        if (data) {
          if (script.during === 'drop') return socket.destroy();
          const end = buffered.indexOf('\r\n.\r\n');
          if (end < 0) return;
          seen.messages.push({ raw: buffered.subarray(0, end + 5), reads: data.reads });
          buffered = buffered.subarray(end + 5);
          data = null;
          if (script.during !== 'silent') socket.write(`${script.final ?? '250 2.0.0 Queued as 1'}\r\n`);
          continue;
        }
        const eol = buffered.indexOf('\r\n');
        if (eol < 0) break;
        const line = buffered.subarray(0, eol).toString('utf8');
        buffered = buffered.subarray(eol + 2);
        if (batch.length === 0) seen.batches.push(batch);
        batch.push(line);
        const verb = line.split(/[ :]/)[0]!.toUpperCase();
        const scriptedReply = script.answer?.(verb, line, socket);
        if (scriptedReply === null) continue;
        if (scriptedReply !== undefined) socket.write(`${scriptedReply}\r\n`);
        else if (verb === 'EHLO') {
          const lines = ['scripted', ...(script.extensions ?? ['PIPELINING', '8BITMIME'])];
          socket.write(lines.map((l, i) => `250${i === lines.length - 1 ? ' ' : '-'}${l}\r\n`).join(''));
        } else if (verb === 'DATA') socket.write('354 Go on\r\n');
        else if (verb === 'QUIT') socket.end('221 Bye\r\n');
        else socket.write('250 2.1.0 Ok\r\n');
        if (verb === 'DATA') {
          data = { chunks: [], reads: 0 };
          if (buffered.length > 0) data.reads += 1;
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const hop: Hop = { name: '127.0.0.1', address: '127.0.0.1', port, tls: 'off' };
  return {
    sessions,
    hop,
    port,
    /** Says `line` on every open connection and closes it (a server ending idle sessions). */
    hangUp: (line: string) => {
      for (const s of sockets) s.end(`${line}\r\n`);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const MESSAGE = Buffer.from(
  `From: a@example.com\r\nTo: b@example.org\r\nSubject: x\r\n\r\n${'Hello, this line is about seventy characters long for the test body.\r\n'.repeat(70)}`,
);
const OPTIONS = {
  hostname: 'mx.postilion.test',
  messagesPerConnection: 100,
  idleTimeoutMs: 10_000,
  connectTimeoutMs: 5000,
  commandTimeoutMs: 5000,
  tlsRejectUnauthorized: false,
};

function sinkHop(sink: SmtpSink, tls: Hop['tls'] = 'off'): Hop {
  return { name: '127.0.0.1', address: sink.host, port: sink.port, tls };
}

describe('SMTP client', () => {
  let pool: SmtpPool | null = null;
  const closers: Array<() => Promise<void>> = [];

  afterEach(async () => {
    pool?.close();
    pool = null;
    for (const close of closers.splice(0)) await close();
  });

  async function withSink(options: Parameters<typeof startSink>[0] = {}) {
    const sink = await startSink(options);
    closers.push(() => sink.close());
    return sink;
  }

  /** smtp-server without PIPELINING, refusing RCPT TO as `refuse` says; what it received. */
  async function withoutPipelining(refuse: (to: string) => string | null) {
    const received: string[] = [];
    const server = new SMTPServer({
      hidePIPELINING: true,
      authOptional: true,
      disabledCommands: ['AUTH', 'STARTTLS'],
      logger: false,
      onRcptTo(address, _session, callback) {
        const text = refuse(address.address);
        if (!text) return callback();
        return callback(Object.assign(new Error(text.slice(4)), { responseCode: Number(text.slice(0, 3)) }));
      },
      onData(stream, session, callback) {
        stream.resume();
        stream.on('end', () => {
          received.push(session.envelope.rcptTo[0]!.address);
          callback();
        });
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const hop: Hop = { name: '127.0.0.1', address: '127.0.0.1', port: (server.server.address() as AddressInfo).port, tls: 'off' };
    return { hop, received };
  }

  async function withScript(script: Script = {}) {
    const server = await scripted(script);
    closers.push(() => server.close());
    return server;
  }

  describe('with PIPELINING', () => {
    it('writes MAIL FROM, RCPT TO and DATA in one write, then the message with its dot line in one', async () => {
      const server = await withScript();
      pool = new SmtpPool(OPTIONS);
      const reply = await pool.send(server.hop, 'a@example.com', 'b@example.org', [MESSAGE.subarray(0, 100), MESSAGE.subarray(100)]);
      expect(reply).to.deep.include({ kind: 'reply', code: 250, text: '2.0.0 Queued as 1', command: 'DATA' });
      const [session] = server.sessions;
      expect(session!.batches).to.deep.equal([['EHLO mx.postilion.test'], ['MAIL FROM:<a@example.com>', 'RCPT TO:<b@example.org>', 'DATA']]);
      expect(session!.messages).to.have.length(1);
      expect(session!.messages[0]!.reads).to.equal(1);
      expect(session!.messages[0]!.raw.equals(Buffer.concat([MESSAGE, Buffer.from('.\r\n')]))).to.equal(true);
    });

    it('delivers to smtp-server with the content intact: dots stuffed, bare line ends made CRLF', async () => {
      const sink = await withSink();
      pool = new SmtpPool(OPTIONS);
      const body = Buffer.from('Subject: dots\r\n\r\n.starts with a dot\r\n..two\nbare LF\rbare CR\r\n.');
      const reply = await pool.send(sinkHop(sink), 'a@example.com', 'b@example.org', [body.subarray(0, 20), body.subarray(20)]);
      expect(reply).to.include({ kind: 'reply', code: 250, command: 'DATA' });
      const [received] = await sink.waitFor(1);
      expect(received!.raw).to.equal('Subject: dots\r\n\r\n.starts with a dot\r\n..two\r\nbare LF\r\nbare CR\r\n.\r\n');
      expect(received!.to).to.deep.equal(['b@example.org']);
    });

    it('reports the RCPT TO refusal, not the DATA reply that follows it in the batch', async () => {
      const sink = await withSink();
      sink.rcpt = () => ({ code: 550, text: '5.1.1 No such user' });
      pool = new SmtpPool(OPTIONS);
      const reply = await pool.send(sinkHop(sink), 'a@example.com', 'nobody@example.org', MESSAGE);
      expect(reply).to.deep.include({ kind: 'reply', code: 550, text: '5.1.1 No such user', command: 'RCPT TO' });
      expect(sink.received).to.have.length(0);
    });

    it('reports a MAIL FROM refusal as such, and a 4xx at RCPT TO as deferrable', async () => {
      let server = await withScript({ answer: (verb) => (verb === 'MAIL' ? '451 4.3.0 Try later' : verb === 'RCPT' ? '503 5.5.1 No MAIL' : undefined) });
      pool = new SmtpPool(OPTIONS);
      expect(await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE)).to.deep.include({
        kind: 'reply',
        code: 451,
        text: '4.3.0 Try later',
        command: 'MAIL FROM',
      });
      server = await withScript({
        answer: (verb) => (verb === 'RCPT' ? '450 4.2.1 Mailbox busy' : verb === 'DATA' ? '554 5.5.1 No valid recipients' : undefined),
      });
      expect(await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE)).to.deep.include({ kind: 'reply', code: 450, command: 'RCPT TO' });
    });
  });

  describe('without PIPELINING', () => {
    it('sends one command per round trip', async () => {
      const server = await withScript({ extensions: ['8BITMIME'] });
      pool = new SmtpPool(OPTIONS);
      for (const to of ['b@example.org', 'c@example.org'])
        expect(await pool.send(server.hop, 'a@example.com', to, MESSAGE)).to.include({ kind: 'reply', code: 250 });
      expect(server.sessions).to.have.length(1);
      expect(server.sessions[0]!.batches.every((batch) => batch.length === 1)).to.equal(true);
      expect(server.sessions[0]!.batches.map((b) => b[0]!.split(/[ :]/)[0])).to.deep.equal(['EHLO', 'MAIL', 'RCPT', 'DATA', 'MAIL', 'RCPT', 'DATA']);
    });

    it('delivers to smtp-server that does not offer it, and reports a refused RCPT TO there too', async () => {
      const server = await withoutPipelining((to) => (to.startsWith('full') ? '452 4.2.2 Mailbox full' : null));
      pool = new SmtpPool(OPTIONS);
      expect(await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE)).to.include({ kind: 'reply', code: 250 });
      expect(await pool.send(server.hop, 'a@example.com', 'full@example.org', MESSAGE)).to.deep.include({ kind: 'reply', code: 452, command: 'RCPT TO' });
      expect(await pool.send(server.hop, 'a@example.com', 'c@example.org', MESSAGE)).to.include({ kind: 'reply', code: 250 });
      expect(server.received).to.deep.equal(['b@example.org', 'c@example.org']);
    });
  });

  describe('replies and failures at each step', () => {
    const cases: Array<{ name: string; script: Script; expected: Record<string, unknown> }> = [
      { name: '421 greeting', script: { greeting: '421 4.3.2 Busy' }, expected: { kind: 'reply', code: 421, text: '4.3.2 Busy', command: 'CONN' } },
      { name: '554 greeting', script: { greeting: '554 5.7.1 Go away' }, expected: { kind: 'reply', code: 554, command: 'CONN' } },
      {
        name: 'EHLO and HELO refused',
        script: { answer: (verb) => (verb === 'EHLO' ? '502 5.5.1 No EHLO' : verb === 'HELO' ? '550 5.7.1 Not you' : undefined) },
        expected: { kind: 'reply', code: 550, command: 'HELO' },
      },
      {
        name: '421 to EHLO',
        script: { answer: (verb) => (verb === 'EHLO' ? '421 4.3.2 Shutting down' : undefined) },
        expected: { kind: 'reply', code: 421, command: 'EHLO' },
      },
      {
        name: '554 to DATA',
        script: { answer: (verb) => (verb === 'DATA' ? '554 5.7.1 Not now' : undefined) },
        expected: { kind: 'reply', code: 554, command: 'DATA' },
      },
      { name: '552 to the message', script: { final: '552 5.3.4 Too big' }, expected: { kind: 'reply', code: 552, text: '5.3.4 Too big', command: 'DATA' } },
      { name: '451 to the message', script: { final: '451 4.7.1 Greylisted' }, expected: { kind: 'reply', code: 451, command: 'DATA' } },
    ];
    for (const { name, script, expected } of cases) {
      it(`${name}: ${JSON.stringify(expected)}`, async () => {
        const server = await withScript(script);
        pool = new SmtpPool(OPTIONS);
        expect(await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE)).to.deep.include(expected);
      });
    }

    it('falls back to HELO when EHLO is refused, and delivers', async () => {
      const server = await withScript({ answer: (verb) => (verb === 'EHLO' ? '500 5.5.1 What?' : undefined) });
      pool = new SmtpPool(OPTIONS);
      expect(await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE)).to.include({ kind: 'reply', code: 250 });
      expect(server.sessions[0]!.batches.map((b) => b.map((l) => l.split(/[ :]/)[0]))).to.deep.equal([['EHLO'], ['HELO'], ['MAIL'], ['RCPT'], ['DATA']]);
    });

    it('reports a connection dropped in the middle of the message as a connection failure', async () => {
      const server = await withScript({ during: 'drop' });
      pool = new SmtpPool(OPTIONS);
      const reply = await pool.send(server.hop, 'a@example.com', 'b@example.org', Buffer.concat(Array(40).fill(MESSAGE) as Buffer[]));
      expect(reply.kind).to.equal('connection');
      expect((reply as { text: string }).text).to.match(/^(ECONNECTION: Connection closed unexpectedly|ESOCKET: read ECONNRESET)/);
    });

    it('reports a refused connection with its system error', async () => {
      const server = await withScript();
      await server.close();
      pool = new SmtpPool(OPTIONS);
      const reply = await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE);
      expect(reply).to.deep.include({ kind: 'connection', tlsMissing: false });
      expect((reply as { text: string }).text).to.match(/^ESOCKET: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
    });

    it('times out a server that never greets within the connect timeout', async () => {
      const server = await withScript({ greeting: null });
      pool = new SmtpPool({ ...OPTIONS, connectTimeoutMs: 200 });
      expect(await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE)).to.deep.include({
        kind: 'connection',
        text: 'ETIMEDOUT: Greeting never received',
        tlsMissing: false,
      });
    });

    it('times out a server that does not answer the message within the command timeout', async () => {
      const server = await withScript({ during: 'silent' });
      pool = new SmtpPool({ ...OPTIONS, commandTimeoutMs: 200 });
      expect(await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE)).to.deep.include({ kind: 'connection', text: 'ETIMEDOUT: Timeout' });
    });

    it('refuses an address that would break the command line, before writing anything', async () => {
      const server = await withScript();
      pool = new SmtpPool(OPTIONS);
      const reply = await pool.send(server.hop, 'a@example.com', 'b@example.org>\r\nRCPT TO:<c@example.org', MESSAGE);
      expect(reply).to.include({ kind: 'connection' });
      expect((reply as { text: string }).text).to.match(/^EENVELOPE: Invalid recipient/);
      expect(server.sessions[0]!.batches.flat().filter((l) => l.startsWith('RCPT'))).to.deep.equal([]);
    });
  });

  describe('sessions', () => {
    it('opens a new session after the server closed a parked one with 421', async () => {
      const server = await withScript();
      pool = new SmtpPool(OPTIONS);
      expect(await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE)).to.include({ code: 250 });
      server.hangUp('421 4.4.2 Idle too long');
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await pool.send(server.hop, 'a@example.com', 'c@example.org', MESSAGE)).to.include({ code: 250 });
      expect(server.sessions).to.have.length(2);
    });

    it('adds SMTPUTF8 to MAIL FROM for a UTF-8 address, and refuses one to a server without it', async () => {
      const sink = await withSink();
      pool = new SmtpPool(OPTIONS);
      expect(await pool.send(sinkHop(sink), 'a@example.com', 'jürgen@example.org', MESSAGE)).to.include({ kind: 'reply', code: 250 });
      const [received] = await sink.waitFor(1);
      expect(received!.smtpUtf8).to.equal(true);
      expect(received!.to).to.deep.equal(['jürgen@example.org']);
      const ascii = await withSink({ hideSmtpUtf8: true });
      expect(await pool.send(sinkHop(ascii), 'a@example.com', 'jürgen@example.org', MESSAGE)).to.include({ kind: 'unsupported', enhanced: '5.6.7' });
    });

    it('ends a session it was cut from at shutdown without settling the send', async () => {
      const server = await withScript({ during: 'silent' });
      pool = new SmtpPool(OPTIONS);
      let settled = false;
      void pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE).finally(() => (settled = true));
      while (server.sessions[0]?.messages.length !== 1) await new Promise((resolve) => setTimeout(resolve, 5));
      pool.close();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(settled).to.equal(false);
    });
  });

  describe('STARTTLS', () => {
    let pems: { cert: string; key: string };
    before(async () => {
      const made = await generate([{ name: 'commonName', value: 'localhost' }], { keySize: 2048, algorithm: 'sha256' });
      pems = { cert: made.cert, key: made.private };
    });

    it('upgrades when offered (opportunistic) and delivers over TLS; the reply carries the TLS of the session', async () => {
      const sink = await withSink({ tls: pems });
      pool = new SmtpPool(OPTIONS);
      const reply = await pool.send(sinkHop(sink, 'opportunistic'), 'a@example.com', 'b@example.org', MESSAGE);
      expect(reply).to.include({ kind: 'reply', code: 250 });
      expect(reply.tls?.version).to.match(/^TLSv1\.[23]$/);
      expect(reply.tls?.verified).to.equal(false);
      const [received] = await sink.waitFor(1);
      expect(received!.secure).to.equal(true);
    });

    it('stays in clear text with tls off, even when STARTTLS is offered', async () => {
      const sink = await withSink({ tls: pems });
      pool = new SmtpPool(OPTIONS);
      const reply = await pool.send(sinkHop(sink, 'off'), 'a@example.com', 'b@example.org', MESSAGE);
      expect(reply).to.include({ kind: 'reply', code: 250 });
      expect(reply.tls?.version).to.equal(null);
      expect((await sink.waitFor(1))[0]!.secure).to.equal(false);
    });

    it('goes on in clear text when an offered STARTTLS is refused, opportunistic only', async () => {
      const refusing = { extensions: ['PIPELINING', 'STARTTLS'], answer: (verb: string) => (verb === 'STARTTLS' ? '454 4.7.0 TLS not available' : undefined) };
      let server = await withScript(refusing);
      pool = new SmtpPool(OPTIONS);
      expect(await pool.send({ ...server.hop, tls: 'opportunistic' }, 'a@example.com', 'b@example.org', MESSAGE)).to.include({ kind: 'reply', code: 250 });
      server = await withScript(refusing);
      const required = await pool.send({ ...server.hop, tls: 'required' }, 'a@example.com', 'b@example.org', MESSAGE);
      expect(required).to.deep.include({ kind: 'connection', tlsMissing: true });
      expect((required as { text: string }).text).to.equal('TLS required but not available: 454 4.7.0 TLS not available');
    });

    it('with TLS required, does not send mail to a server that does not offer STARTTLS', async () => {
      const sink = await withSink();
      pool = new SmtpPool(OPTIONS);
      const reply = await pool.send(sinkHop(sink, 'required'), 'a@example.com', 'b@example.org', MESSAGE);
      expect(reply).to.deep.include({ kind: 'connection', tlsMissing: true });
      expect((reply as { text: string }).text).to.match(/^TLS required but not available: 5\d\d /);
      expect(sink.received).to.have.length(0);
    });

    it('fails the handshake with a certificate it cannot verify when told to verify', async () => {
      const sink = await withSink({ tls: pems });
      pool = new SmtpPool({ ...OPTIONS, tlsRejectUnauthorized: true });
      const reply = await pool.send(sinkHop(sink, 'opportunistic'), 'a@example.com', 'b@example.org', MESSAGE);
      expect(reply).to.deep.include({ kind: 'connection', tlsMissing: true });
      expect((reply as { text: string }).text).to.match(/^TLS required but not available: Error initiating TLS - /);
    });
  });

  it('the client alone: lists the extensions, reuses the session, and fails with the step and reply', async () => {
    const sink = await withSink();
    const client = new SmtpClient({
      host: sink.host,
      port: sink.port,
      name: 'client.test',
      starttls: 'ignore',
      tls: {},
      connectTimeoutMs: 2000,
      commandTimeoutMs: 2000,
    });
    await client.open();
    expect([...client.extensions]).to.include.members(['PIPELINING', 'SMTPUTF8', '8BITMIME']);
    expect(await client.send('a@example.com', 'b@example.org', MESSAGE)).to.match(/^250 /);
    expect(await client.send('', 'c@example.org', MESSAGE)).to.match(/^250 /);
    sink.rcpt = () => ({ code: 550, text: '5.1.1 Unknown' });
    const err = (await client.send('a@example.com', 'd@example.org', MESSAGE).catch((e: unknown) => e)) as SmtpError;
    expect(err).to.include({ code: 'EENVELOPE', command: 'RCPT TO', responseCode: 550 });
    expect(err.response).to.match(/^550 5\.1\.1 Unknown/);
    const [first, second] = await sink.waitFor(2);
    expect([first!.from, second!.from]).to.deep.equal(['a@example.com', '']);
  });
});
