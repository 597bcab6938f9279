import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { DataEncoder } from './data-encoder.ts';

export interface ClientOptions {
  host: string;
  port: number;
  /** The local address the session binds to (a delivery source). */
  localAddress?: string | undefined;
  /** EHLO name. */
  name: string;
  /** ignore: never STARTTLS; opportunistic: when offered, going on in clear text if it is refused; required: STARTTLS or no session. */
  starttls: 'ignore' | 'opportunistic' | 'required';
  /** For the TLS handshake: servername, rejectUnauthorized, secureContext, minVersion. */
  tls: ConnectionOptions;
  /** Connecting, the greeting and a STARTTLS handshake, all together. */
  connectTimeoutMs: number;
  /** Silence of the server while a reply is due (and of a parked session: it is closed). */
  commandTimeoutMs: number;
}

/**
 * Why a session or transaction failed, in nodemailer's terms (the pool maps them to SendReply
 * as it did): `code` ECONNECTION, ESOCKET, ETIMEDOUT, ETLS, EPROTOCOL, EENVELOPE, EMESSAGE;
 * `command` the step ("CONN", "EHLO", "MAIL FROM", "RCPT TO", "DATA", …); `response` the reply.
 */
export class SmtpError extends Error {
  override name = 'SmtpError';
  readonly responseCode: number | undefined;
  /** The session's addresses, when it got as far as connecting. */
  addresses?: { remoteAddress?: string | undefined; localAddress?: string | undefined };
  constructor(
    text: string,
    readonly code: string,
    readonly command: string,
    readonly response?: string,
  ) {
    super(response ? `${text}: ${response}` : text);
    this.responseCode = response ? Number(/^(\d{3})/.exec(response)?.[1] ?? 0) || undefined : undefined;
  }
}

/** A reply longer than this (a server that never ends one) fails the session. */
const MAX_REPLY = 1024 * 1024;
/** TCP keepalive after this long idle: keeps NAT mappings of parked sessions. */
const KEEPALIVE_MS = 30_000;
/** How long a QUIT may wait for the server to close. */
const QUIT_MS = 5000;

/**
 * One SMTP client session on a net/tls socket: connect, greeting, EHLO (HELO fallback),
 * STARTTLS, then transactions of one recipient each. With PIPELINING (RFC 2920) MAIL FROM,
 * RCPT TO and DATA leave in one write and their three replies are read after it; the message
 * follows with its terminating dot, corked into one write. Any failure ends the session: the
 * pool never reuses one after an error. `onEnd` runs once when the session is over, whatever
 * ended it (the server may close a parked one).
 */
export class SmtpClient {
  socket: Socket | TLSSocket;
  /** After STARTTLS. */
  secure = false;
  /** The EHLO keywords (upper case) of the session as it is now (after STARTTLS: the second EHLO's). */
  extensions = new Set<string>();
  remoteAddress: string | undefined;
  localAddress: string | undefined;
  onEnd: (() => void) | null = null;

  private readonly replies: string[] = [];
  private waiter: { resolve: (reply: string) => void; reject: (err: SmtpError) => void } | null = null;
  /** Replies due for commands written. */
  private due = 0;
  private partial = '';
  private lines: string[] = [];
  private failure: SmtpError | null = null;
  private ended = false;
  private quitting = false;
  /** Connecting, greeting or TLS handshake under way: its timeout error, and the deadline of them all. */
  private phase: { timer: NodeJS.Timeout | null; deadline: number } = { timer: null, deadline: 0 };

  /** Connects at once; open() sets the session up. */
  constructor(private readonly options: ClientOptions) {
    this.socket = netConnect({ host: options.host, port: options.port, ...(options.localAddress ? { localAddress: options.localAddress } : {}) });
    this.phase.deadline = Date.now() + options.connectTimeoutMs;
  }

  /** Makes the session ready for its first MAIL FROM; rejects with an SmtpError (with the addresses, if connected). */
  async open(): Promise<void> {
    try {
      await this.setUp();
    } catch (err) {
      this.close();
      const failure = err instanceof SmtpError ? err : new SmtpError(String((err as Error)?.message ?? err), 'ECONNECTION', 'CONN');
      failure.addresses = { remoteAddress: this.remoteAddress, localAddress: this.localAddress };
      throw failure;
    }
  }

  /** Sends one message to one recipient; resolves with the reply to the data, rejects with an SmtpError. */
  async send(from: string, to: string, message: Buffer | readonly Buffer[]): Promise<string> {
    from = from.trim();
    to = to.trim();
    if (/[\r\n<>]/.test(from)) throw new SmtpError(`Invalid sender ${JSON.stringify(from)}`, 'EENVELOPE', 'API');
    if (!to || /[\r\n<>]/.test(to)) throw new SmtpError(`Invalid recipient ${JSON.stringify(to)}`, 'EENVELOPE', 'API');
    try {
      const utf8 = this.extensions.has('SMTPUTF8') && (nonAscii(from) || nonAscii(to));
      const mail = `MAIL FROM:<${from}>${utf8 ? ' SMTPUTF8' : ''}\r\n`;
      const rcpt = `RCPT TO:<${to}>\r\n`;
      if (this.extensions.has('PIPELINING')) {
        this.write(mail + rcpt + 'DATA\r\n', 3);
        mailReply(await this.reply(), from, utf8);
        rcptReply(await this.reply(), to, utf8);
        dataReply(await this.reply());
      } else {
        this.write(mail, 1);
        mailReply(await this.reply(), from, utf8);
        this.write(rcpt, 1);
        rcptReply(await this.reply(), to, utf8);
        this.write('DATA\r\n', 1);
        dataReply(await this.reply());
      }
      this.writeData(message);
      const reply = await this.reply();
      if (reply[0] !== '2') throw new SmtpError('Message failed', 'EMESSAGE', 'DATA', reply);
      return reply;
    } catch (err) {
      this.close();
      throw err;
    }
  }

  /** RSET: checks that a parked session is still there. */
  async reset(): Promise<void> {
    try {
      this.write('RSET\r\n', 1);
      const reply = await this.reply();
      if (reply[0] !== '2') throw new SmtpError(`Could not reset session state. response=${reply}`, 'EPROTOCOL', 'RSET', reply);
    } catch (err) {
      this.close();
      throw err;
    }
  }

  /** QUIT, then the socket ends with the server's reply (or after QUIT_MS). */
  quit(): void {
    if (this.ended || this.quitting) return;
    this.quitting = true;
    this.write('QUIT\r\n', 1);
    this.reply().then(
      () => this.close(),
      () => this.close(),
    );
    setTimeout(() => this.close(), QUIT_MS).unref();
  }

  /** Ends the session at once; what waits for it fails with the session's failure. */
  close(): void {
    if (this.ended) return;
    this.failure ??= new SmtpError('Connection closed', 'ECONNECTION', 'CONN');
    const waiter = this.waiter;
    this.end();
    waiter?.reject(this.failure);
  }

  /**
   * Ends the session at once and leaves what waits for it waiting for ever: at shutdown, a send
   * cut short must not be recorded as failed (the message stays due for the next start).
   */
  abandon(): void {
    this.failure ??= new SmtpError('Connection closed', 'ECONNECTION', 'CONN');
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.waiter = null;
    this.stopPhase();
    this.socket.destroy();
    this.onEnd?.();
  }

  private async setUp(): Promise<void> {
    // The greeting is due as soon as the connection is up.
    this.due = 1;
    this.startPhase('Connection timeout');
    this.listen(this.socket);
    await new Promise<void>((resolve, reject) => {
      this.waiter = { resolve: () => resolve(), reject };
      this.socket.once('connect', () => {
        this.waiter = null;
        resolve();
      });
    });
    this.remoteAddress = this.socket.remoteAddress;
    this.localAddress = this.socket.localAddress;
    this.socket.setNoDelay(true);
    this.socket.setKeepAlive(true, KEEPALIVE_MS);
    this.socket.setTimeout(this.options.commandTimeoutMs);
    this.startPhase('Greeting never received');
    const greeting = await this.reply();
    this.stopPhase();
    if (!greeting.startsWith('220')) throw new SmtpError(`Invalid greeting. response=${greeting}`, 'EPROTOCOL', 'CONN', greeting);
    const ehlo = await this.hello();
    const { starttls } = this.options;
    if (!ehlo || starttls === 'ignore' || (!this.extensions.has('STARTTLS') && starttls !== 'required')) return;
    this.write('STARTTLS\r\n', 1);
    const reply = await this.reply();
    if (reply[0] !== '2') {
      // Opportunistic: the session goes on in clear text with what the server offered for it.
      if (starttls === 'opportunistic') return;
      throw new SmtpError('Error upgrading connection with STARTTLS', 'ETLS', 'STARTTLS', reply);
    }
    await this.upgrade();
    await this.hello();
  }

  /** EHLO, or HELO where EHLO is refused (not when TLS is required: HELO has no STARTTLS); false after HELO. */
  private async hello(): Promise<boolean> {
    this.write(`EHLO ${this.options.name.replace(/[\r\n]+/g, '')}\r\n`, 1);
    const reply = await this.reply();
    if (reply.startsWith('421')) throw new SmtpError(`Server terminates connection. response=${reply}`, 'ECONNECTION', 'EHLO', reply);
    if (reply[0] === '2') {
      this.extensions = extensionsOf(reply);
      return true;
    }
    if (this.options.starttls === 'required') {
      throw new SmtpError(`EHLO failed but HELO does not support required STARTTLS. response=${reply}`, 'ECONNECTION', 'EHLO', reply);
    }
    this.write(`HELO ${this.options.name.replace(/[\r\n]+/g, '')}\r\n`, 1);
    const helo = await this.reply();
    if (helo[0] !== '2') throw new SmtpError(`Invalid HELO. response=${helo}`, 'EPROTOCOL', 'HELO', helo);
    this.extensions = new Set();
    return false;
  }

  /** The TLS handshake over the session's socket (RFC 3207); what came in clear text after the 220 is dropped. */
  private async upgrade(): Promise<void> {
    const plain = this.socket;
    this.unlisten(plain);
    // The TLS socket reports what goes wrong underneath; an error event with no listener would throw.
    plain.on('error', () => undefined);
    plain.setTimeout(0);
    this.partial = '';
    this.lines = [];
    this.replies.length = 0;
    this.startPhase('TLS handshake timed out');
    const secure = tlsConnect({ ...this.options.tls, socket: plain, host: this.options.host });
    this.socket = secure;
    const failed = (err: Error) => this.fail(new SmtpError(`Error initiating TLS - ${err.message}`, 'ETLS', 'STARTTLS'));
    const closed = () => this.fail(new SmtpError('Connection closed unexpectedly', 'ETLS', 'CONN'));
    secure.on('error', failed);
    secure.on('close', closed);
    await new Promise<void>((resolve, reject) => {
      this.waiter = { resolve: () => resolve(), reject };
      secure.once('secureConnect', () => {
        this.waiter = null;
        resolve();
      });
    });
    this.stopPhase();
    secure.removeListener('error', failed);
    secure.removeListener('close', closed);
    this.secure = true;
    this.listen(secure);
    secure.setTimeout(this.options.commandTimeoutMs);
  }

  private listen(socket: Socket): void {
    socket.on('data', this.onData);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    socket.on('timeout', this.onTimeout);
  }

  private unlisten(socket: Socket): void {
    socket.removeListener('data', this.onData);
    socket.removeListener('error', this.onError);
    socket.removeListener('close', this.onClose);
    socket.removeListener('timeout', this.onTimeout);
  }

  private readonly onError = (err: Error) => this.fail(new SmtpError(err.message, 'ESOCKET', 'CONN'));
  private readonly onTimeout = () => this.fail(new SmtpError('Timeout', 'ETIMEDOUT', 'CONN'));

  private readonly onClose = () => {
    if (this.ended) return;
    // A server that closes a session with nothing due (a parked one, after its idle time) is no failure.
    if (this.due === 0 && this.lines.length === 0 && !this.partial.trim()) {
      this.close();
      return;
    }
    // An unterminated last line that reads like a refusal is that refusal.
    const rest = this.partial.trim();
    const refusal = /^[45]\d{2}[ -]/.test(rest) ? decode(rest) : undefined;
    this.fail(new SmtpError('Connection closed unexpectedly', 'ECONNECTION', 'CONN', refusal));
  };

  private readonly onData = (chunk: Buffer) => {
    const text = this.partial + chunk.toString('latin1');
    let start = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      const line = text.charCodeAt(nl - 1) === 13 ? text.slice(start, nl - 1) : text.slice(start, nl);
      start = nl + 1;
      if (!this.line(line) || this.ended) return;
    }
    this.partial = start === 0 ? text : text.slice(start);
    if (this.partial.length > MAX_REPLY) this.fail(new SmtpError('Server response exceeds maximum allowed size', 'EPROTOCOL', 'CONN'));
  };

  /** One line of a reply; false when the session failed. */
  private line(line: string): boolean {
    if (this.lines.length === 0 && !line.trim()) return true;
    this.lines.push(line);
    if (/^\d{3}-/.test(line)) {
      if (this.lines.length * 100 > MAX_REPLY) {
        this.fail(new SmtpError('Server response exceeds maximum allowed size', 'EPROTOCOL', 'CONN'));
        return false;
      }
      return true;
    }
    const reply = decode(this.lines.length === 1 ? line : this.lines.join('\n'));
    this.lines = [];
    const closing = reply.startsWith('421');
    if (this.due === 0) {
      // RFC 5321 §4.2: 421 may come at any time; unasked, it ends a parked session.
      if (closing) this.close();
      else this.fail(new SmtpError('Unexpected Response', 'EPROTOCOL', 'CONN', reply));
      return false;
    }
    this.due -= 1;
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = null;
      waiter.resolve(reply);
    } else this.replies.push(reply);
    if (closing) {
      // The replies to commands sent along with the answered one are not going to come.
      this.fail(new SmtpError('Server closed the connection', 'ECONNECTION', 'CONN', reply));
      return false;
    }
    return true;
  }

  private write(commands: string, replies: number): void {
    if (this.ended) return;
    this.due += replies;
    this.socket.write(commands);
  }

  /** The message with its terminating dot, corked: one write on the socket. */
  private writeData(message: Buffer | readonly Buffer[]): void {
    if (this.ended) return;
    const encoder = new DataEncoder();
    const socket = this.socket;
    this.due += 1;
    socket.cork();
    if (Buffer.isBuffer(message)) socket.write(encoder.encode(message));
    else for (const part of message) socket.write(encoder.encode(part));
    socket.write(encoder.end());
    socket.uncork();
  }

  /** The next reply (queued ones first), or the failure that ended the session. */
  private reply(): Promise<string> {
    const queued = this.replies.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  private fail(err: SmtpError): void {
    if (this.ended) return;
    this.failure = err;
    this.close();
  }

  private startPhase(text: string): void {
    this.stopPhase();
    const left = Math.max(this.phase.deadline - Date.now(), 1);
    this.phase.timer = setTimeout(() => this.fail(new SmtpError(text, 'ETIMEDOUT', 'CONN')), left);
  }

  private stopPhase(): void {
    if (this.phase.timer) clearTimeout(this.phase.timer);
    this.phase.timer = null;
  }
}

function mailReply(reply: string, from: string, utf8: boolean): void {
  if (reply[0] === '2') return;
  const text = utf8 && reply.startsWith('550 ') && nonAscii(from) ? 'Internationalized mailbox name not allowed' : 'Mail command failed';
  throw new SmtpError(text, 'EENVELOPE', 'MAIL FROM', reply);
}

function rcptReply(reply: string, to: string, utf8: boolean): void {
  if (reply[0] === '2') return;
  const text = utf8 && reply.startsWith('553 ') && nonAscii(to) ? 'Internationalized mailbox name not allowed' : 'Recipient command failed';
  throw new SmtpError(text, 'EENVELOPE', 'RCPT TO', reply);
}

/** 354, or 250 from some servers (as nodemailer accepts). */
function dataReply(reply: string): void {
  if (reply[0] !== '2' && reply[0] !== '3') throw new SmtpError('Data command failed', 'EENVELOPE', 'DATA', reply);
}

/** The keywords of an EHLO reply (its lines after the first), upper case. */
function extensionsOf(reply: string): Set<string> {
  const out = new Set<string>();
  const lines = reply.split('\n');
  for (let i = 1; i < lines.length; i++) {
    const keyword = /^\d{3}[ -]([A-Za-z0-9][A-Za-z0-9-]*)/.exec(lines[i]!)?.[1];
    if (keyword) out.add(keyword.toUpperCase());
  }
  return out;
}

const nonAscii = (s: string) => /[^\x00-\x7f]/.test(s);

/** Reply text has no set charset (RFC 5321 §4.2.1): UTF-8 when the bytes are UTF-8, else as they came. */
function decode(latin1: string): string {
  if (!/[\x80-\xff]/.test(latin1)) return latin1;
  const utf8 = Buffer.from(latin1, 'latin1').toString('utf8');
  return utf8.includes('\uFFFD') ? latin1 : utf8;
}
