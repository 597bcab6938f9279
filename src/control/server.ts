import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from '../logging/logger.ts';
import { AppError, badRequest, conflict, notFound } from '../util/errors.ts';
import { handleAdmin } from './admin-handler.ts';
import type { AdminOperations } from './admin-protocol.ts';
import { DOCTOR_PATHS, type DoctorReads } from './doctor-protocol.ts';
import type { DrainLine, ListQuery, QueueOperations, Selection } from './protocol.ts';

/** Longest Unix socket path the kernel takes (sun_path is 108 bytes with its NUL on Linux). */
export const MAX_SOCKET_PATH = 107;
/** A selection of ids is at most this large (about 200 000 ids). */
const QUEUE_BODY_LIMIT = 8 * 1024 * 1024;
/** An admin argument (names, a label, scopes, an allow list) is far smaller. */
const ADMIN_BODY_LIMIT = 64 * 1024;
/** Request line and headers: the CLI sends a few short ones. */
const HEADER_LIMIT = 8 * 1024;
const ADMIN_PREFIX = '/v1/admin/';

/** What the control socket serves: the one queue and the one admin implementation of the daemon. */
export interface ControlHandlers {
  queue: QueueOperations;
  admin: AdminOperations;
  /** Read-only answers for `postilion doctor`. */
  doctor: DoctorReads;
  /** A consistent copy of the store and the key files, as a stream (backup/format.ts). */
  backup?: () => AsyncIterable<Buffer>;
  /** `postilion queue drain` (cluster mode): progress lines, then the result. Absent: a node on its own. */
  drain?: (to: string, waitSeconds?: number) => AsyncGenerator<DrainLine>;
  /** `postilion ui login|logout --all`: the dashboard's operator sign-in. Absent: a daemon without the dashboard. */
  ui?: UiSignIn;
}

/** The dashboard's operator sign-in, as the control socket offers it. */
export interface UiSignIn {
  /** A one-time sign-in link (a secret: never logged), and when it expires. */
  login(): Promise<{ url: string; expires_at: string }>;
  /** Ends every dashboard session; how many there were. */
  logoutAll(): Promise<{ revoked: number }>;
}

/**
 * The daemon's local control channel: HTTP with JSON bodies over a Unix socket that only the
 * daemon's user can open (mode 0600). It serves the `postilion queue`, `accounts`, `keys` and
 * `domains` commands while the daemon holds the store:
 *
 *   GET  /v1/queue/status
 *   GET  /v1/queue/messages?domain=&account=&state=&limit=
 *   POST /v1/queue/retry   {ids?, domain?, account?, all?}
 *   POST /v1/queue/purge   {ids?, domain?, account?, all?}
 *   POST /v1/queue/suspend {destination}   POST /v1/queue/resume {destination}
 *   POST /v1/queue/drain   {to, wait_seconds?}   (cluster mode) one JSON line per step (protocol.ts DrainLine)
 *   POST /v1/admin/<operation>   the operation's argument (see admin-protocol.ts)
 *   GET  /v1/doctor/listeners    GET /v1/doctor/domains   (see doctor-protocol.ts)
 *   GET  /v1/backup   the backup stream (application/octet-stream, see backup/format.ts)
 *   POST /v1/ui/login   {}   a one-time operator sign-in link for the dashboard
 *   POST /v1/ui/logout-all   {}   every dashboard session ended
 *
 * Errors answer `{ "message": … }` with the AppError's status; an unexpected failure 500. A body
 * past its route's limit gets 413 (and the connection is closed), malformed JSON 400, an argument
 * of the wrong shape 400; headers past 8 KiB get Node's 431.
 * Request and response bodies are never logged: a created key's secret travels in one.
 */
export class ControlServer {
  private closing: Promise<void> | null = null;
  private served: { handlers: ControlHandlers; log: Logger } | null = null;
  private readonly serving: Promise<{ handlers: ControlHandlers; log: Logger }>;
  private serve_!: (what: { handlers: ControlHandlers; log: Logger }) => void;

  private constructor(
    private readonly server: Server,
    readonly path: string,
  ) {
    this.serving = new Promise((resolve) => (this.serve_ = resolve));
    // Until `serve`, requests wait: the socket is bound before the store is opened.
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      if (this.served) void handle(req, res, this.served.handlers, this.served.log);
      else void this.serving.then(({ handlers, log }) => handle(req, res, handlers, log));
    });
  }

  /**
   * Listens on `path`, answering nothing until `serve` (the daemon's bind phase, before it opens
   * the store). A socket file found there that a process answers on is in use: this rejects with
   * EADDRINUSE (another daemon runs on this data directory). One that nobody answers on is left
   * over from a crash and replaced.
   */
  static async bind(path: string): Promise<ControlServer> {
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
      throw new Error(`control socket path ${path} is longer than ${MAX_SOCKET_PATH} bytes: use a shorter data.dir`);
    }
    await removeStale(path);
    const server = createServer({ maxHeaderSize: HEADER_LIMIT });
    server.headersTimeout = 10_000;
    server.requestTimeout = 60_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      // The socket is created by the synchronous bind inside listen(): with this umask it is
      // never, even for a moment, open to other users.
      const umask = process.umask(0o177);
      try {
        server.listen(path, () => {
          server.off('error', reject);
          resolve();
        });
      } finally {
        process.umask(umask);
      }
    });
    chmodSync(path, 0o600);
    return new ControlServer(server, path);
  }

  /** Answers requests from now on (those that came earlier first). */
  serve(handlers: ControlHandlers, log: Logger): void {
    this.served = { handlers, log };
    this.serve_(this.served);
    log.info({ path: this.path }, 'control socket listening');
  }

  /** Stops listening (the socket file goes), lets requests in flight finish within `graceMs`. */
  close(graceMs: number): Promise<void> {
    this.closing ??= this.shut(graceMs);
    return this.closing;
  }

  private async shut(graceMs: number): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const timer = setTimeout(() => this.server.closeAllConnections(), graceMs);
    timer.unref();
    await closed;
    clearTimeout(timer);
    try {
      unlinkSync(this.path);
    } catch {
      // Already removed by the close, as it should be.
    }
  }
}

async function removeStale(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!isSocket) throw new Error(`${path} exists and is not a socket: move it away so the control socket can be created`);
  if (await answers(path)) {
    throw Object.assign(new Error(`listen EADDRINUSE: address already in use ${path}`), { code: 'EADDRINUSE', syscall: 'listen', address: path });
  }
  unlinkSync(path);
}

/** Whether a process accepts connections on the Unix socket at `path`. */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function handle(req: IncomingMessage, res: ServerResponse, { queue, admin, doctor, backup, drain, ui }: ControlHandlers, log: Logger): Promise<void> {
  try {
    const url = new URL(req.url ?? '/', 'http://control');
    const route = `${req.method} ${url.pathname}`;
    if (req.method === 'POST' && url.pathname.startsWith(ADMIN_PREFIX)) {
      const operation = url.pathname.slice(ADMIN_PREFIX.length);
      return send(res, 200, await handleAdmin(operation, await readJson(req, ADMIN_BODY_LIMIT), admin, log));
    }
    switch (route) {
      case `GET ${DOCTOR_PATHS.listeners}`:
        return send(res, 200, await doctor.listeners());
      case `GET ${DOCTOR_PATHS.domains}`:
        return send(res, 200, await doctor.domains());
      case 'GET /v1/queue/status':
        return send(res, 200, await queue.status());
      case 'GET /v1/queue/messages':
        return send(res, 200, await queue.list(listQuery(url.searchParams)));
      case 'POST /v1/queue/retry': {
        const result = await queue.retry(selection(await readJson(req, QUEUE_BODY_LIMIT)));
        log.info({ op: 'queue retry', retried: result.retried, already_due: result.already_due }, 'operator retried queued messages');
        return send(res, 200, result);
      }
      case 'POST /v1/queue/purge': {
        const result = await queue.purge(selection(await readJson(req, QUEUE_BODY_LIMIT)));
        log.info({ op: 'queue purge', purged: result.purged, in_delivery: result.in_delivery }, 'operator purged queued messages');
        return send(res, 200, result);
      }
      case 'POST /v1/queue/suspend':
      case 'POST /v1/queue/resume': {
        const body = await readJson(req, QUEUE_BODY_LIMIT);
        const destination = (body as { destination?: unknown } | null)?.destination;
        if (typeof destination !== 'string') throw badRequest('destination must be a string');
        const result = url.pathname.endsWith('/suspend') ? await queue.suspend(destination) : await queue.resume(destination);
        log.info(
          { op: `queue ${url.pathname.slice('/v1/queue/'.length)}`, destination: result.destination, changed: result.changed },
          'operator changed a destination',
        );
        return send(res, 200, result);
      }
      case 'POST /v1/queue/drain': {
        const { to, waitSeconds } = drainArguments(await readJson(req, ADMIN_BODY_LIMIT));
        if (!drain) throw conflict('queue drain hands queued mail to another node of a cluster: this node runs on its own (no cluster.database_url)');
        return await sendLines(res, drain(to, waitSeconds), log);
      }
      case 'POST /v1/ui/login': {
        await readJson(req, ADMIN_BODY_LIMIT);
        if (!ui) throw notFound('this daemon serves no dashboard');
        const link = await ui.login();
        // The link is a secret: only that one was made, never the link itself.
        log.info({ op: 'ui login', expires_at: link.expires_at }, 'operator asked for a dashboard sign-in link');
        return send(res, 200, link);
      }
      case 'POST /v1/ui/logout-all': {
        await readJson(req, ADMIN_BODY_LIMIT);
        if (!ui) throw notFound('this daemon serves no dashboard');
        const result = await ui.logoutAll();
        log.info({ op: 'ui logout all', revoked: result.revoked }, 'operator ended every dashboard session');
        return send(res, 200, result);
      }
      case 'GET /v1/backup':
        if (!backup) throw notFound('this daemon takes no backup');
        return await sendBackup(res, backup(), log);
      default:
        throw notFound(`no such control operation: ${route}`);
    }
  } catch (err) {
    // Refused before its body was read whole: the rest is never read, the connection goes.
    const close = !req.complete;
    if (err instanceof AppError) return send(res, err.status, { message: err.message }, close);
    log.error({ err }, 'control request failed');
    return send(res, 500, { message: (err as Error).message }, close);
  }
}

function listQuery(params: URLSearchParams): ListQuery {
  const limit = params.get('limit');
  return {
    domain: params.get('domain') ?? undefined,
    account: params.get('account') ?? undefined,
    state: params.get('state') ?? undefined,
    limit: limit === null ? undefined : Number(limit),
  };
}

/** The request body as a Selection; the admin checks the values themselves. */
function selection(body: unknown): Selection {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('the body must be a JSON object');
  const b = body as Record<string, unknown>;
  const text = (key: string) => {
    const v = b[key];
    if (v !== undefined && typeof v !== 'string') throw badRequest(`${key} must be a string`);
    return v;
  };
  if (b.ids !== undefined && !(Array.isArray(b.ids) && b.ids.every((id) => typeof id === 'string'))) throw badRequest('ids must be a list of strings');
  if (b.all !== undefined && typeof b.all !== 'boolean') throw badRequest('all must be true or false');
  return { ids: b.ids, domain: text('domain'), account: text('account'), all: b.all };
}

function drainArguments(body: unknown): { to: string; waitSeconds: number | undefined } {
  const b = body as { to?: unknown; wait_seconds?: unknown } | null;
  if (typeof b?.to !== 'string') throw badRequest('to must be a string: the node to hand the queue to');
  if (b.wait_seconds !== undefined && typeof b.wait_seconds !== 'number') throw badRequest('wait_seconds must be a number');
  return { to: b.to, waitSeconds: b.wait_seconds };
}

/**
 * Sends the lines as they come, one JSON object each. A refusal before the first line is the
 * HTTP answer; after it, an error is the last line. A client that goes away ends the lines.
 */
async function sendLines(res: ServerResponse, lines: AsyncGenerator<DrainLine>, log: Logger): Promise<void> {
  const first = await lines.next();
  res.writeHead(200, { 'content-type': 'application/x-ndjson' });
  let step = first;
  try {
    while (!step.done) {
      if (res.destroyed) {
        await lines.return(undefined);
        return;
      }
      res.write(`${JSON.stringify(step.value)}\n`);
      step = await lines.next();
    }
  } catch (err) {
    const status = err instanceof AppError ? err.status : 500;
    if (!(err instanceof AppError)) log.error({ err }, 'control request failed');
    res.write(`${JSON.stringify({ error: { status, message: (err as Error).message } } satisfies DrainLine)}\n`);
  }
  res.end();
}

async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const tooLarge = () => new AppError(413, `request body too large (at most ${limit} bytes)`);
  if (Number(req.headers['content-length'] ?? 0) > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  // Not destroyed on an early exit: the 413 must still reach the client.
  for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw badRequest('the body is not valid JSON');
  }
}

/** Streams the backup; a failure half-way cuts the stream, which the client finds without its end frame. */
async function sendBackup(res: ServerResponse, stream: AsyncIterable<Buffer>, log: Logger): Promise<void> {
  log.info('backup started');
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  try {
    await pipeline(Readable.from(stream, { objectMode: false }), res);
    log.info('backup sent');
  } catch (err) {
    log.warn({ err }, 'backup not sent whole');
    res.destroy();
  }
}

function send(res: ServerResponse, status: number, body: unknown, close = false): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...(close ? { connection: 'close' } : {}),
  });
  res.end(text);
}
