/**
 * The SMTP client of test/bench/smtp-relay.ts: the same client drives Postilion and the Postfix
 * relay, so that their figures differ by the server only.
 *
 * It takes Postfix's `smtp-source` options that the benchmarks use, and behaves like it: S
 * sessions share M messages, commands go one at a time (no pipelining), each message is a
 * From/To/Date/Message-Id header block and a body of L bytes in 80-byte lines, and with -d a
 * session sends all its messages over one connection (else one connection per message). So
 * test/bench/peers/peer-postfix-relay.sh (a copy of the shared peer script) can run it in smtp-source's place (smtp-relay.ts puts
 * a `smtp-source` that starts it first in that script's PATH). Unlike smtp-source it says EHLO, and
 * authenticates with AUTH PLAIN (in clear: loopback) when BENCH_SMTP_USER and BENCH_SMTP_PASS
 * are set. Sessions connect and authenticate one after another, then send side by side: Postilion
 * counts an AUTH in progress as a failure until it succeeds, so that more than
 * smtp.submission.auth_failures.limit (5) AUTHs at once from one address get 454.
 *
 *   node smtp-relay-client.mjs [-d] [-s sessions] [-m messages] [-l bytes] [-f from] [-t to] host[:port]
 *
 * smtp-relay.ts runs it transpiled to plain JavaScript (no tsx: node starts in ~70 ms, not
 * ~400 ms, and the start-up is inside both sides' clocks), so it imports nothing but node:.
 * Nothing goes to stdout (the peer script reads stdout); at exit one line goes to stderr:
 *   smtp-relay-client {"messages":…,"sessions":…,"seconds":…,"cpuSeconds":…,"startupSeconds":…}
 * and the exit status is 1 after any unexpected reply or connection error.
 */
import { hostname } from 'node:os';
import { connect, type Socket } from 'node:net';

const STATS_PREFIX = 'smtp-relay-client';

interface Options {
  sessions: number;
  messages: number;
  bytes: number;
  from: string;
  to: string;
  reuse: boolean;
  host: string;
  port: number;
  auth: { user: string; pass: string } | null;
}

/** No reply for this long is a failure, so that a stuck server cannot hold a run. */
const REPLY_TIMEOUT_MS = 60_000;

function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options {
  const options: Options = {
    sessions: 1,
    messages: 1,
    bytes: 0,
    from: 'sender@bench.test',
    to: 'rcpt@bench.test',
    reuse: false,
    host: '',
    port: 25,
    auth: null,
  };
  const count = (flag: string, value: string | undefined): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) throw new Error(`${flag} needs a whole number, not ${value}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    switch (arg) {
      case '-d':
        options.reuse = true;
        break;
      case '-s':
        options.sessions = Math.max(1, count(arg, argv[++i]));
        break;
      case '-m':
        options.messages = count(arg, argv[++i]);
        break;
      case '-l':
        options.bytes = count(arg, argv[++i]);
        break;
      case '-f':
        options.from = argv[++i] ?? '';
        break;
      case '-t':
        options.to = argv[++i] ?? '';
        break;
      default: {
        if (arg.startsWith('-')) throw new Error(`unknown option ${arg}`);
        const colon = arg.lastIndexOf(':');
        options.host = colon < 0 ? arg : arg.slice(0, colon);
        if (colon >= 0) options.port = count('port', arg.slice(colon + 1));
      }
    }
  }
  if (!options.host) throw new Error('usage: smtp-relay-client [-d] [-s sessions] [-m messages] [-l bytes] [-f from] [-t to] host[:port]');
  const { BENCH_SMTP_USER: user, BENCH_SMTP_PASS: pass } = env;
  if (user && pass) options.auth = { user, pass };
  return options;
}

/**
 * About L bytes of body in lines of 80 bytes (CRLF included), each a running number and X's, like
 * smtp-source's; the last line is shorter, and never under 3 bytes, so the body ends with CRLF.
 */
function body(bytes: number): Buffer {
  const lines: string[] = [];
  for (let n = 1, left = bytes; left > 0; n++) {
    const size = Math.max(3, Math.min(80, left));
    lines.push(`${n}`.padEnd(size - 2, 'X').slice(0, size - 2) + '\r\n');
    left -= size;
  }
  return Buffer.from(lines.join(''), 'latin1');
}

/** One SMTP connection: writes commands, reads (multi-line) replies one at a time. */
class Connection {
  private buffered = '';
  private waiting: { resolve: (reply: { code: number; text: string }) => void; reject: (err: Error) => void } | null = null;
  private failure: Error | null = null;
  private readonly lines: string[] = [];

  private constructor(private readonly socket: Socket) {
    socket.setEncoding('latin1');
    socket.setNoDelay(true);
    socket.on('data', (chunk: string) => this.read(chunk));
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new Error('connection closed by the server')));
  }

  static open(host: string, port: number): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port });
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(new Connection(socket));
      });
      socket.once('error', reject);
    });
  }

  /** Sends `data` (a command line, or a message ending with the dot), then waits for the reply, which must be `expect`. */
  async send(data: string | Buffer, expect: number, what: string): Promise<string> {
    if (data.length > 0) this.socket.write(data);
    const reply = await this.reply(what);
    if (reply.code !== expect) throw new Error(`${what}: expected ${expect}, got ${reply.code} ${reply.text}`);
    return reply.text;
  }

  close(): void {
    this.failure ??= new Error('closed');
    this.socket.destroy();
  }

  private reply(what: string): Promise<{ code: number; text: string }> {
    if (this.failure) return Promise.reject(new Error(`${what}: ${this.failure.message}`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.fail(new Error(`no reply within ${REPLY_TIMEOUT_MS} ms`)), REPLY_TIMEOUT_MS);
      this.waiting = {
        resolve: (reply) => {
          clearTimeout(timer);
          resolve(reply);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(new Error(`${what}: ${err.message}`));
        },
      };
      this.deliver();
    });
  }

  private read(chunk: string): void {
    this.buffered += chunk;
    let end: number;
    while ((end = this.buffered.indexOf('\n')) >= 0) {
      this.lines.push(this.buffered.slice(0, end).replace(/\r$/, ''));
      this.buffered = this.buffered.slice(end + 1);
    }
    this.deliver();
  }

  /** Hands a complete reply (up to a line "NNN " or "NNN") to the waiting caller. */
  private deliver(): void {
    if (!this.waiting) return;
    const last = this.lines.findIndex((line) => line.length < 4 || line[3] === ' ');
    if (last < 0) return;
    const lines = this.lines.splice(0, last + 1);
    const waiting = this.waiting;
    this.waiting = null;
    waiting.resolve({ code: Number(lines[last]!.slice(0, 3)), text: lines.join(' | ') });
  }

  private fail(err: Error): void {
    this.failure ??= err;
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.reject(err);
  }
}

async function run(options: Options): Promise<void> {
  const helo = hostname() || 'localhost';
  const content = body(options.bytes);
  const dot = Buffer.from('.\r\n');
  let left = options.messages;

  const open = async (): Promise<Connection> => {
    const c = await Connection.open(options.host, options.port);
    await c.send('', 220, 'greeting');
    const ehlo = await c.send(`EHLO ${helo}\r\n`, 250, 'EHLO');
    if (options.auth) {
      if (!/\bAUTH\b[^|]*\bPLAIN\b/i.test(ehlo)) throw new Error(`the server offers no AUTH PLAIN: ${ehlo}`);
      const token = Buffer.from(`\0${options.auth.user}\0${options.auth.pass}`).toString('base64');
      await c.send(`AUTH PLAIN ${token}\r\n`, 235, 'AUTH');
    }
    return c;
  };

  // One connection set up at a time (see above); a failed one does not hold up the next.
  let opening: Promise<unknown> = Promise.resolve();
  const openInTurn = (): Promise<Connection> => {
    const next = opening.then(open);
    opening = next.catch(() => undefined);
    return next;
  };

  const session = async (s: number): Promise<void> => {
    let c: Connection | null = null;
    try {
      while (left > 0) {
        const n = options.messages - left;
        left -= 1;
        c ??= await openInTurn();
        const head =
          `From: <${options.from}>\r\nTo: <${options.to}>\r\nDate: ${new Date().toUTCString()}\r\n` +
          `Message-Id: <${process.pid}.${s}.${n}.${Date.now()}@${helo}>\r\n\r\n`;
        await c.send(`MAIL FROM:<${options.from}>\r\n`, 250, 'MAIL FROM');
        await c.send(`RCPT TO:<${options.to}>\r\n`, 250, 'RCPT TO');
        await c.send('DATA\r\n', 354, 'DATA');
        await c.send(Buffer.concat([Buffer.from(head, 'latin1'), content, dot]), 250, 'end of DATA');
        if (!options.reuse) {
          await c.send('QUIT\r\n', 221, 'QUIT');
          c.close();
          c = null;
        }
      }
      if (c) await c.send('QUIT\r\n', 221, 'QUIT');
    } finally {
      c?.close();
    }
  };

  await Promise.all(Array.from({ length: Math.min(options.sessions, Math.max(1, options.messages)) }, (_, s) => session(s)));
}

async function main(): Promise<void> {
  const startup = process.uptime();
  const started = performance.now();
  let code = 0;
  let options: Options | null = null;
  try {
    options = parseOptions(process.argv.slice(2), process.env);
    await run(options);
  } catch (err) {
    process.stderr.write(`${STATS_PREFIX}: ${(err as Error).message}\n`);
    code = 1;
  }
  const cpu = process.cpuUsage();
  const stats = {
    messages: options?.messages ?? 0,
    sessions: options?.sessions ?? 0,
    seconds: (performance.now() - started) / 1000,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    startupSeconds: startup,
    ok: code === 0,
  };
  process.stderr.write(`${STATS_PREFIX} ${JSON.stringify(stats)}\n`);
  // After a failure the other sessions may still be waiting on the server: do not wait for them.
  if (code !== 0) process.exit(code);
}

await main();
