import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';

/** One SMTP reply: its code and the text of each line (without the code). */
export interface SmtpReply {
  code: number;
  lines: string[];
  /** The whole reply as sent, lines joined with \n. */
  raw: string;
}

/**
 * A bare SMTP client on a socket, for tests that check exactly what the server says and when:
 * no client library in between deciding to STARTTLS or to AUTH on its own.
 */
export class RawSmtp {
  private buffer = '';
  private waiting: Array<{ resolve: (reply: SmtpReply) => void; reject: (err: Error) => void }> = [];
  private replies: SmtpReply[] = [];
  private closed = false;

  private constructor(private socket: Socket | TLSSocket) {
    this.listen(socket);
  }

  /** Connects (with implicit TLS when `tls`) from `localAddress` and reads the greeting. */
  static async open(port: number, options: { localAddress: string; tls?: boolean }): Promise<{ client: RawSmtp; greeting: SmtpReply }> {
    const plain = await new Promise<Socket>((resolve, reject) => {
      const s = netConnect({ host: '127.0.0.1', port, localAddress: options.localAddress }, () => resolve(s));
      s.once('error', reject);
    });
    const socket = options.tls ? await handshake(plain) : plain;
    const client = new RawSmtp(socket);
    return { client, greeting: await client.read() };
  }

  /** Sends one line (CRLF added) and reads the reply to it. */
  async command(line: string): Promise<SmtpReply> {
    this.write(`${line}\r\n`);
    return this.read();
  }

  /** Writes bytes as they are (a string as UTF-8), without reading a reply. */
  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** The next reply the server sends (rejects once the connection closes without one). */
  read(): Promise<SmtpReply> {
    const ready = this.replies.shift();
    if (ready) return Promise.resolve(ready);
    if (this.closed) return Promise.reject(new Error('the server closed the connection'));
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  /** STARTTLS (220 expected), then the TLS handshake on the same socket. */
  async starttls(): Promise<void> {
    const reply = await this.command('STARTTLS');
    if (reply.code !== 220) throw new Error(`STARTTLS answered ${reply.raw}`);
    const plain = this.socket;
    plain.removeAllListeners('data');
    plain.removeAllListeners('close');
    this.socket = await handshake(plain);
    this.listen(this.socket);
  }

  /** Resolves once the server has closed the connection. */
  whenClosed(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => this.socket.once('close', () => resolve()));
  }

  close(): void {
    this.socket.destroy();
  }

  private listen(socket: Socket | TLSSocket): void {
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => this.take(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      for (const w of this.waiting.splice(0)) w.reject(new Error('the server closed the connection'));
    });
  }

  private take(chunk: string): void {
    this.buffer += chunk;
    for (;;) {
      const lines = this.buffer.split('\r\n');
      // A reply ends with a line of the form "250 text" (a space, not a dash, after the code).
      const last = lines.findIndex((l) => /^\d{3}(?: |$)/.test(l));
      if (last < 0 || last === lines.length - 1) return;
      const own = lines.slice(0, last + 1);
      this.buffer = lines.slice(last + 1).join('\r\n');
      const reply: SmtpReply = { code: Number(own[last]!.slice(0, 3)), lines: own.map((l) => l.slice(4)), raw: own.join('\n') };
      const waiter = this.waiting.shift();
      if (waiter) waiter.resolve(reply);
      else this.replies.push(reply);
    }
  }
}

/** A TLS client handshake on a connected socket (the test certificate is self-signed). */
function handshake(socket: Socket): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ socket, rejectUnauthorized: false }, () => resolve(s));
    s.once('error', reject);
  });
}

/** The SASL PLAIN token of a username and password. */
export function plainToken(username: string, password: string): string {
  return Buffer.from(`\0${username}\0${password}`).toString('base64');
}
