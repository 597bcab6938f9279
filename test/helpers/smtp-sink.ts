import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';

/** One message as the sink received it. */
export interface Received {
  from: string;
  to: string[];
  raw: string;
  secure: boolean;
  host: string;
  /** Whether the sink has given its reply to the DATA (the client may be gone by then). */
  answered: boolean;
  /** Whether MAIL FROM carried the SMTPUTF8 parameter. */
  smtpUtf8: boolean;
  /** The client's address (the source it sent from) and the name it gave in EHLO. */
  client: { address: string; ehlo: string };
}

/** What the sink answers at RCPT TO: null accepts, an Error with responseCode refuses. */
export type RcptRule = (address: string, attempt: number) => { code: number; text: string } | null;

export interface SmtpSink {
  host: string;
  port: number;
  received: Received[];
  /** Connections opened to the sink so far. */
  connections: number;
  /** The client's address of each connection, in order. */
  peers: string[];
  /** Replies for RCPT TO, by recipient address (attempt counts from 1 per address). */
  rcpt: RcptRule;
  /**
   * Called once a message's DATA has been read, before the sink answers it; the reply waits for
   * the returned promise. Tests hold transactions in flight with it (a slow or stalled MX).
   */
  hold: (message: Received) => Promise<void> | void;
  /** DATA transactions read and not answered yet (held). */
  held: number;
  close(): Promise<void>;
  /** Resolves once `count` messages have arrived. */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
}

/** A real smtp-server on loopback acting as an MX host: records what it is sent. */
export async function startSink(
  options: { host?: string; port?: number; tls?: { key: string; cert: string }; /** An MX that does not offer SMTPUTF8. */ hideSmtpUtf8?: boolean } = {},
): Promise<SmtpSink> {
  const host = options.host ?? '127.0.0.1';
  const attempts = new Map<string, number>();
  const sink: SmtpSink = {
    host,
    port: 0,
    received: [],
    connections: 0,
    peers: [],
    rcpt: () => null,
    hold: () => undefined,
    held: 0,
    close: async () => undefined,
    waitFor: async (count, timeoutMs = 10_000) => {
      const deadline = Date.now() + timeoutMs;
      while (sink.received.length < count) {
        if (Date.now() > deadline) throw new Error(`sink ${host}:${sink.port} got ${sink.received.length} of ${count} messages`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return sink.received;
    },
  };
  const serverOptions: SMTPServerOptions = {
    authOptional: true,
    disabledCommands: options.tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...(options.tls ? { key: options.tls.key, cert: options.tls.cert } : {}),
    logger: false,
    ...(options.hideSmtpUtf8 ? { hideSMTPUTF8: true } : {}),
    onConnect(session, callback) {
      sink.connections += 1;
      sink.peers.push(session.remoteAddress);
      callback();
    },
    onRcptTo(address, _session, callback) {
      const n = (attempts.get(address.address) ?? 0) + 1;
      attempts.set(address.address, n);
      const reply = sink.rcpt(address.address, n);
      if (!reply) return callback();
      const err = new Error(reply.text) as Error & { responseCode: number };
      err.responseCode = reply.code;
      return callback(err);
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const message: Received = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
          secure: session.secure,
          host,
          answered: false,
          smtpUtf8: session.envelope.smtpUtf8 === true,
          client: { address: session.remoteAddress.replace(/^::ffff:/, ''), ehlo: session.hostNameAppearsAs },
        };
        sink.received.push(message);
        sink.held += 1;
        void Promise.resolve(sink.hold(message)).finally(() => {
          sink.held -= 1;
          message.answered = true;
          callback();
        });
      });
    },
  };
  const server = new SMTPServer(serverOptions);
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  sink.port = (server.server.address() as AddressInfo).port;
  sink.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return sink;
}
