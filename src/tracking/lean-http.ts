import { STATUS_CODES } from 'node:http';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { listen, listeningUrl } from '../util/listen.ts';
import type { Maybe } from '../util/maybe.ts';

/** A request head larger than this is refused (431), as node's own limit would (16 KiB). */
const MAX_HEAD_BYTES = 16 * 1024;
const MAX_HEADER_LINES = 100;
/** A request head must be complete this long after its first byte (slow clients), as the API's headersTimeout. */
const HEAD_MS = 30_000;
/** An idle connection is closed after this long without a byte. */
const IDLE_MS = 5_000;
/** Bytes of pipelined requests held while one is answered, at most; past it the connection stops being read. */
const MAX_BUFFERED = 64 * 1024;
const VERSION = /^HTTP\/1\.[01]$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** What the tracking endpoint reads of a request. */
export interface LeanRequest {
  /** As sent (GET and HEAD are answered; the handler answers anything else). */
  method: string;
  /** The request target, origin form ("/c/abc?x"). */
  target: string;
  host: string | undefined;
  userAgent: string | undefined;
  /** Every X-Forwarded-For line, joined by commas. */
  forwardedFor: string | undefined;
  /** The connection: its peer address, and a key for what is known of it. */
  socket: Socket;
}

/** A whole answer: its header lines (each `Name: value\r\n`, Content-Length included) and body. */
export interface LeanAnswer {
  status: number;
  headers: string;
  body: Buffer | null;
}

export type LeanHandler = (req: LeanRequest) => Maybe<LeanAnswer>;

interface Connection {
  socket: Socket;
  buffered: Buffer | null;
  /** When the first byte of the request head being read came. */
  headSince: number;
  /** A request is being answered (the next one, pipelined, waits). */
  answering: boolean;
  /** Closing: no further request is read, the connection ends after the answer in hand. */
  last: boolean;
  /** The client is not reading its answers: no further request is read until they drain. */
  stalled: boolean;
}

/**
 * The tracking listener's HTTP/1.1 server: the requests it answers are a GET with no body and a
 * few headers, answered with a pixel, a redirect or a short error, and node's general HTTP server
 * (request and response streams, events per request) cost as much as the whole answer. This
 * one reads a request head, hands the parts the endpoint needs to the handler, and writes the
 * answer in one write; keep-alive and pipelining (answered in order) as HTTP/1.1 has them.
 *
 * What it takes no part in is refused and the connection closed: a request body
 * (Content-Length other than 0, Transfer-Encoding) 400, a head over 16 KiB or 100 lines 431,
 * a malformed request line or header (obs-fold included), HTTP/1.1 without one Host 400, any
 * version but 1.0 and 1.1 505, a head not complete in 30 s 408. Idle connections close after 5 s.
 */
export class LeanHttpServer {
  private readonly connections = new Set<Connection>();
  private closing = false;
  private drained: (() => void) | null = null;

  private constructor(
    private readonly server: Server,
    private readonly handler: LeanHandler,
    private readonly onError: (err: unknown) => void,
    private readonly headMs: number,
    private readonly idleMs: number,
  ) {}

  /** `headMs` and `idleMs` (30 s and 5 s) are there for tests. */
  static async start(
    spec: { host: string; port: number; tls?: { cert: Buffer; key: Buffer }; headMs?: number; idleMs?: number },
    handler: LeanHandler,
    onError: (err: unknown) => void,
  ): Promise<LeanHttpServer> {
    let self: LeanHttpServer | null = null;
    const accept = (socket: Socket) => self?.accept(socket);
    const server: Server = spec.tls
      ? createTlsServer({ cert: spec.tls.cert, key: spec.tls.key }, accept).on('tlsClientError', () => {})
      : createNetServer(accept);
    self = new LeanHttpServer(server, handler, onError, spec.headMs ?? HEAD_MS, spec.idleMs ?? IDLE_MS);
    await listen(server, spec.port, spec.host);
    return self;
  }

  get url(): string {
    return listeningUrl(this.server);
  }

  /** Stops accepting, lets the requests being answered finish until `graceMs`, then cuts what is left. */
  async close(graceMs: number): Promise<void> {
    this.closing = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const c of this.connections) {
      c.last = true;
      if (!c.answering) c.socket.destroy();
    }
    if (this.connections.size > 0) {
      await Promise.race([new Promise<void>((resolve) => (this.drained = resolve)), new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref())]);
    }
    for (const c of this.connections) c.socket.destroy();
    await closed;
  }

  private accept(socket: Socket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    const c: Connection = { socket, buffered: null, headSince: 0, answering: false, last: false, stalled: false };
    this.connections.add(c);
    socket.setNoDelay(true);
    socket.setTimeout(this.idleMs, () => {
      // Idle between requests, or a head too slow in coming.
      if (c.buffered !== null && !c.answering) this.refuse(c, 408, 'request timeout');
      else if (!c.answering) socket.destroy();
    });
    socket.on('data', (chunk: Buffer) => {
      // Past a `Connection: close` request (or a refusal) nothing more is read.
      if (c.last) return;
      if (c.buffered === null) c.headSince = Date.now();
      c.buffered = c.buffered === null ? chunk : Buffer.concat([c.buffered, chunk]);
      if (c.answering || c.stalled) {
        if (c.buffered.length > MAX_BUFFERED) socket.pause();
        return;
      }
      this.read(c);
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      this.connections.delete(c);
      if (this.connections.size === 0) this.drained?.();
    });
  }

  /** Answers the requests buffered, in order, until one must wait or the bytes run out. */
  private read(c: Connection): void {
    while (c.buffered !== null && !c.answering && !c.last && !c.socket.destroyed) {
      if (c.socket.writableLength > MAX_BUFFERED) {
        // Pipelined requests whose answers are not read: nothing more is read until they are.
        c.stalled = true;
        c.socket.once('drain', () => {
          c.stalled = false;
          c.socket.resume();
          this.read(c);
        });
        return;
      }
      const end = c.buffered.indexOf('\r\n\r\n');
      if (end < 0) {
        if (c.buffered.length > MAX_HEAD_BYTES) this.refuse(c, 431, 'request headers too large');
        else if (Date.now() - c.headSince > this.headMs) this.refuse(c, 408, 'request timeout');
        return;
      }
      if (end > MAX_HEAD_BYTES) return this.refuse(c, 431, 'request headers too large');
      const head = c.buffered.toString('latin1', 0, end);
      c.buffered = end + 4 < c.buffered.length ? c.buffered.subarray(end + 4) : null;
      if (c.buffered !== null) c.headSince = Date.now();
      const parsed = parseHead(head, c.socket);
      if ('status' in parsed) return this.refuse(c, parsed.status, parsed.message);
      const { request, keepAlive } = parsed;
      if (!keepAlive) c.last = true;
      let answer: Maybe<LeanAnswer>;
      try {
        answer = this.handler(request);
      } catch (err) {
        this.onError(err);
        return this.refuse(c, 500, 'internal error');
      }
      if (answer instanceof Promise) {
        c.answering = true;
        answer.then(
          (a) => {
            c.answering = false;
            this.write(c, a, request.method === 'HEAD');
            c.socket.resume();
            this.read(c);
          },
          (err: unknown) => {
            c.answering = false;
            this.onError(err);
            this.refuse(c, 500, 'internal error');
          },
        );
        return;
      }
      this.write(c, answer, request.method === 'HEAD');
    }
  }

  /** Writes an answer; `head`: the request was a HEAD (headers only, Content-Length as for GET). */
  private write(c: Connection, a: LeanAnswer, head: boolean): void {
    if (c.socket.destroyed) return;
    const lines =
      `HTTP/1.1 ${a.status} ${STATUS_CODES[a.status] ?? ''}\r\nDate: ${httpDate()}\r\n${a.headers}` +
      (c.last ? 'Connection: close\r\n\r\n' : `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(this.idleMs / 1000)}\r\n\r\n`);
    if (a.body === null || head) c.socket.write(lines, 'latin1');
    else c.socket.write(Buffer.concat([Buffer.from(lines, 'latin1'), a.body]));
    if (c.last) c.socket.end();
    if (this.closing && c.buffered === null) c.socket.end();
  }

  /** Answers what cannot be read on with a short error, and closes the connection. */
  private refuse(c: Connection, status: number, message: string): void {
    c.last = true;
    c.buffered = null;
    const body = Buffer.from(message, 'utf8');
    this.write(c, { status, headers: `Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${body.length}\r\nCache-Control: no-store\r\n`, body }, false);
    // A client that does not read its answer must not hold the socket open.
    setTimeout(() => c.socket.destroy(), this.idleMs).unref();
  }
}

type Parsed = { request: LeanRequest; keepAlive: boolean } | { status: number; message: string };

/** The request line and the headers the endpoint reads; what is malformed is an error status. */
function parseHead(head: string, socket: Socket): Parsed {
  const lines = head.split('\r\n');
  if (lines.length > MAX_HEADER_LINES + 1) return { status: 431, message: 'too many request headers' };
  const [method, target, version, extra] = lines[0]!.split(' ');
  if (!method || !target || !version || extra !== undefined || !TOKEN.test(method)) return { status: 400, message: 'bad request line' };
  if (!VERSION.test(version)) return { status: 505, message: 'HTTP version not supported' };
  if (!target.startsWith('/')) return { status: 400, message: 'bad request target' };
  let host: string | undefined;
  let userAgent: string | undefined;
  let forwardedFor: string | undefined;
  let connection = '';
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    // A header folded over lines (obs-fold) or without a name is refused (RFC 9112 §5).
    if (colon <= 0 || line.charCodeAt(0) === 32 || line.charCodeAt(0) === 9) return { status: 400, message: 'bad header line' };
    const name = line.slice(0, colon).toLowerCase();
    if (!TOKEN.test(name)) return { status: 400, message: 'bad header name' };
    const value = line.slice(colon + 1).trim();
    switch (name) {
      case 'host':
        if (host !== undefined) return { status: 400, message: 'more than one Host header' };
        host = value;
        break;
      case 'user-agent':
        userAgent = value;
        break;
      case 'x-forwarded-for':
        forwardedFor = forwardedFor === undefined ? value : `${forwardedFor}, ${value}`;
        break;
      case 'connection':
        connection += `,${value.toLowerCase()}`;
        break;
      case 'content-length':
        if (value !== '0') return { status: 400, message: 'a request body is not accepted' };
        break;
      case 'transfer-encoding':
        return { status: 400, message: 'a request body is not accepted' };
      default:
        break;
    }
  }
  const http10 = version === 'HTTP/1.0';
  if (!http10 && host === undefined) return { status: 400, message: 'the Host header is required' };
  const tokens = connection.split(',').map((t) => t.trim());
  const keepAlive = http10 ? tokens.includes('keep-alive') : !tokens.includes('close');
  return { request: { method, target, host, userAgent, forwardedFor, socket }, keepAlive };
}

/** The Date header's value (RFC 9110 §5.6.7), made once a second. */
let dateText = '';
let dateSecond = 0;
function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}
