import { createServer as createHttpServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { BoundSocket } from '../util/bound-socket.ts';
import { listen, listeningUrl } from '../util/listen.ts';
import { allowedMethods } from './allowed-methods.ts';
import { errorBody } from './middleware/errors.ts';
import { closeInStages, drainAndLinger } from './staged-close.ts';

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

export interface ListenerSpec {
  host: string;
  port: number;
  tls?: { cert: Buffer; key: Buffer };
  /** The socket bound for it by the daemon's bind phase (then host and port are its address). */
  bound?: BoundSocket;
  /**
   * Headers for the answers written here, before the app sees the request, by its path (null:
   * no path could be read): the dashboard's security headers on its /ui paths.
   */
  headersFor?: (path: string | null) => Record<string, string>;
  /** Requests refused before the app sees them are logged here (info): a pino logger, or what stands for one. */
  log?: { info(fields: Record<string, unknown>, message: string): void };
}

/**
 * One listening socket of the API, HTTP or HTTPS, that can stop accepting and drain: in-flight
 * requests get until the deadline, then remaining connections are cut.
 *
 * What Node answers by itself (parse errors, CONNECT, unknown expectations, a missing Host) is
 * answered here instead, with the contract's error body: `{status}` under /v1, `{message}`
 * elsewhere.
 */
export class ApiListener {
  private inFlight = 0;
  private idle: (() => void) | null = null;

  private constructor(private readonly server: Server | HttpsServer) {}

  static async start(spec: ListenerSpec, handler: RequestListener): Promise<ApiListener> {
    // Node's own empty-bodied 400 for a missing Host is replaced by ours below.
    const options = { requireHostHeader: false };
    const server = spec.tls ? createHttpsServer({ ...options, cert: spec.tls.cert, key: spec.tls.key }) : createHttpServer(options);
    server.headersTimeout = 30_000;
    server.requestTimeout = 120_000;
    server.keepAliveTimeout = 5_000;
    const listener = new ApiListener(server);
    // A response that ends its connection is not cut off by the body the client is still sending.
    server.on(spec.tls ? 'secureConnection' : 'connection', (socket: Socket) => closeInStages(socket));
    const refused = (status: number, method: string | undefined, path: string | null, reason: string) =>
      spec.log?.info({ method, path, status, reason }, 'request refused before routing');

    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      listener.inFlight++;
      res.once('close', () => {
        listener.inFlight--;
        if (listener.inFlight === 0) listener.idle?.();
      });
      if (req.httpVersion === '1.1' && req.headers.host === undefined) {
        refused(400, req.method, pathOf(req.url), 'missing Host header');
        return answer(res, 400, req.url, 'the Host header is required', { ...spec.headersFor?.(pathOf(req.url)), Connection: 'close' });
      }
      void handler(req, res);
    });
    // 100-continue is sent once the app starts reading the body (see rawBody): a request refused
    // before that (authentication, limits) is answered without the client sending its body.
    server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => server.emit('request', req, res));
    server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
      refused(417, req.method, pathOf(req.url), `unsupported expectation "${req.headers.expect}"`);
      answer(res, 417, req.url, 'the only supported expectation is 100-continue', { ...spec.headersFor?.(pathOf(req.url)), Connection: 'close' });
    });
    // This is no proxy. Without a listener Node would drop the connection without a word.
    server.on('connect', (req: IncomingMessage, socket: Duplex) => {
      refused(501, req.method, null, 'CONNECT');
      socket.on('error', () => socket.destroy());
      writeRaw(socket, 501, null, 'unsupported HTTP method');
    });
    // Sockets answered after a parse error: the parser errs again on every later piece of the
    // body the client is still sending, and those bytes are to be dropped (see drainAndLinger),
    // not answered with a reset.
    const answered = new WeakSet<Duplex>();
    server.on('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex) => {
      if (answered.has(socket)) return;
      // A response already on its way on this connection must not be corrupted by a second one.
      const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
      // The client went away (reset, or closed in the middle of a request): nobody to answer.
      const gone = err.code === 'ECONNRESET' || err.code === 'HPE_INVALID_EOF_STATE';
      if (gone || !socket.writable || inFlight?.headersSent) return socket.destroy();
      const line = requestLine(err.rawPacket);
      const { status, message, headers } = clientErrorStatus(err.code, line);
      refused(status, line?.method, line?.path ?? null, err.code ?? err.message);
      answered.add(socket);
      writeRaw(socket, status, line?.path ?? null, message, { ...spec.headersFor?.(line?.path ?? null), ...headers });
    });

    if (spec.bound) await spec.bound.handTo(server);
    else await listen(server, spec.port, spec.host);
    return listener;
  }

  get address(): AddressInfo {
    return this.server.address() as AddressInfo;
  }

  get url(): string {
    return listeningUrl(this.server);
  }

  /** New certificate and key for new connections (HTTPS only). */
  reloadTls(tls: { cert: Buffer; key: Buffer }): void {
    if ('setSecureContext' in this.server) this.server.setSecureContext({ cert: tls.cert, key: tls.key });
  }

  /** Stops accepting, lets in-flight requests finish until `graceMs`, then cuts what is left. */
  async close(graceMs: number): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    if (this.inFlight > 0) {
      await Promise.race([new Promise<void>((resolve) => (this.idle = resolve)), new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref())]);
    }
    this.server.closeAllConnections();
    await closed;
  }
}

/**
 * Status, words and headers for what Node's parser refused, as Node's own answers would have it;
 * a method Node does not know (`FOO`, `get`) is answered as the router answers any method it
 * has no route for: 405 with `Allow` where the path is routed, 404 where it is not.
 */
export function clientErrorStatus(
  code: string | undefined,
  line: { method: string; path: string | null } | null,
): { status: number; message: string; headers?: Record<string, string> } {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, message: 'request headers too large' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, message: 'chunk extensions too large' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, message: 'request timeout' };
    case 'HPE_INVALID_METHOD': {
      // A well-formed request line with a method Node does not know; anything else is garbage.
      if (!line) return { status: 400, message: 'bad request' };
      if (line.path === null) return { status: 501, message: 'unsupported HTTP method' };
      const allow = allowedMethods(line.path);
      if (allow.length === 0) return { status: 404, message: 'not found' };
      return { status: 405, message: 'method not allowed', headers: { Allow: allow.join(', ') } };
    }
    default:
      return { status: 400, message: 'bad request' };
  }
}

const LINE_WINDOW = 8192;
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+)( HTTP\/\d\.\d\r?\n)?/;

/**
 * The method and path of the request line at the start of what the parser choked on, when it
 * is there (a request whose headers came in several packets has only its last one here). A
 * target running past the first 8 KiB (an overlong URL) still counts as a request line.
 */
export function requestLine(raw: Buffer | undefined): { method: string; path: string | null } | null {
  if (!raw) return null;
  const text = raw.subarray(0, LINE_WINDOW).toString('latin1');
  const match = REQUEST_LINE.exec(text);
  if (!match) return null;
  const overlong = match[0].length === LINE_WINDOW;
  return match[3] || overlong ? { method: match[1]!, path: pathOf(match[2]) } : null;
}

/** The path of a request target: origin form ("/v1/x?y") or absolute form ("http://h/v1/x"). */
function pathOf(target: string | undefined): string | null {
  if (!target) return null;
  if (target.startsWith('/')) return target.split('?')[0]!;
  try {
    return new URL(target).pathname;
  } catch {
    return null;
  }
}

function answer(res: ServerResponse, status: number, target: string | undefined, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(errorBody(pathOf(target) ?? '', message));
  res.writeHead(status, { ...headers, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

/** A whole response written to a socket Node has let go of; the connection is then closed. */
function writeRaw(socket: Duplex, status: number, path: string | null, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(errorBody(path ?? '', message));
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${extra}` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
  // Read until the client closes (a body it is still sending must not reset the answer), but a
  // client that does not read its answer must not hold the socket open.
  drainAndLinger(socket, 5_000);
}
