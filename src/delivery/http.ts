import http from 'node:http';
import https from 'node:https';
import type { LookupAddress, LookupOptions } from 'node:dns';
import type { Socket } from 'node:net';
import { urlToHttpOptions } from 'node:url';
import { performance } from 'node:perf_hooks';
import type { Cidr } from '../util/cidr.ts';
import { Lru } from '../util/lru.ts';
import { signatureHeaders } from './signing.ts';
import { parseTargetUrl, TargetRefusedError, type HostResolver } from './http-target.ts';
import { bareHost, isIpLiteral, isLocalName, refusedAddress, refusedTarget } from './target-address.ts';

/**
 * The HTTP dispatcher's client: one signed JSON POST per call, an outcome object back, nothing
 * stored. Connections are kept alive and reused per origin (node's agents pool by host and
 * port); redirects are never followed; the address actually dialled is checked against the
 * target rules at connect time, so a name re-pointed at a private address after it was saved
 * (DNS rebinding) is refused there.
 */

export interface HttpClientOptions {
  /** The configured resolver (`dns.servers`): the one the URL was checked with when saved. */
  resolver: HostResolver;
  /** `webhooks.allow_networks`, read per request so that a reload takes effect. */
  allowNetworks: () => readonly Cidr[];
  /**
   * The whole exchange, connect to last byte read (default 10 s, reference-api §5.4), counted
   * from when the request has a connection: one queued behind an origin's busy connections is
   * not timed while it waits.
   */
  timeoutMs?: number;
  /**
   * Connections per origin (default 4): requests past it wait for one of them to be free, and
   * go out on it as soon as it is, in the order they were made.
   */
  maxSocketsPerOrigin?: number;
  /** Origins with a number of connections of their own (`delivery.destinations`). */
  originSockets?: Readonly<Record<string, number>>;
  /** Response bytes kept for the outcome (default 4 KiB); the rest is read and dropped. */
  keepResponseBytes?: number;
  /** A response longer than this is cut off, and its connection closed (default 64 KiB). */
  drainResponseBytes?: number;
  userAgent?: string;
}

/**
 * A JSON request body, exactly as signed and sent: text, or its UTF-8 bytes; a large one (a
 * route payload) as a list of buffers, signed and written one after another, never joined.
 */
export type PostBody = string | Buffer | readonly Buffer[];

/** One signed delivery: the same `id` on every attempt, a fresh `timestampSeconds` on each. */
export interface SignedPost {
  url: string;
  body: PostBody;
  id: string;
  timestampSeconds: number;
  /** The webhook's (or route's) secret in clear: the HMAC key is its UTF-8 bytes. */
  secret: string;
}

export interface HttpOutcome {
  /** A 2xx answer. Anything else (3xx included), a timeout or a connection error is a failure. */
  ok: boolean;
  /** The status received, or null when none was (connection refused, timeout before headers). */
  status: number | null;
  /** What went wrong, for the delivery record and logs; null when ok. At most a few hundred characters. */
  error: string | null;
  /** The first bytes of the response body (at most keepResponseBytes), as text. */
  responseText: string;
  durationMs: number;
  /**
   * No answer came from the origin at all: the connection was refused or reset, or its name did
   * not resolve. The origin is down, rather than refusing this request. (A timeout is not this:
   * it is a failed attempt like a bad status.)
   */
  unreachable: boolean;
  /**
   * Not sent: withdrawn (`HttpClient.withdraw`) while it waited for a connection. Not an
   * attempt: nothing reached the origin.
   */
  withdrawn?: boolean;
}

/** A target URL as requests are made to it: its request options, with the agent of its origin. */
interface Target {
  https: boolean;
  origin: string;
  options: http.RequestOptions;
}

/** A request made and not ended: its connection (null while it waits for one), and how to end it as withdrawn. */
interface Live {
  origin: string;
  socket: Socket | null;
  fail: (err: Error) => void;
}

type Agents = { http: http.Agent; https: https.Agent };

/** Target URLs whose check is kept. */
const CHECKED_URLS = 1000;
const DEFAULTS = { timeoutMs: 10_000, maxSocketsPerOrigin: 4, keepResponseBytes: 4096, drainResponseBytes: 64 * 1024 };
const MAX_ERROR_TEXT = 300;
const IDLE_TIMEOUT_MS = 4_000;

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

export class HttpClient {
  private readonly agents: Agents;
  /** Agents of the origins with a number of connections of their own. */
  private readonly originAgents = new Map<string, Agents>();
  private readonly settings: typeof DEFAULTS;
  /** Requests made and not ended, those waiting for a connection included: close cuts them. */
  private readonly live = new Map<http.ClientRequest, Live>();
  private readonly checked = new Lru<string, Target | { refused: string }>(CHECKED_URLS);
  private checkedFor: readonly Cidr[] | null = null;

  constructor(private readonly options: HttpClientOptions) {
    this.settings = {
      timeoutMs: options.timeoutMs ?? DEFAULTS.timeoutMs,
      maxSocketsPerOrigin: options.maxSocketsPerOrigin ?? DEFAULTS.maxSocketsPerOrigin,
      keepResponseBytes: options.keepResponseBytes ?? DEFAULTS.keepResponseBytes,
      drainResponseBytes: options.drainResponseBytes ?? DEFAULTS.drainResponseBytes,
    };
    this.agents = this.newAgents(this.settings.maxSocketsPerOrigin);
  }

  private newAgents(maxSockets: number): Agents {
    // An idle connection is closed after 4 s, before a receiver with node's default keep-alive
    // timeout (5 s) closes it under a request (agents also honour a `Keep-Alive: timeout=` hint).
    const agentOptions = { keepAlive: true, timeout: IDLE_TIMEOUT_MS, maxSockets, lookup: this.lookup };
    return { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };
  }

  /** The agents of an origin: its own when it has its own number of connections. */
  private agentsOf(url: URL): Agents {
    const own = this.options.originSockets?.[url.origin];
    if (own === undefined) return this.agents;
    let agents = this.originAgents.get(url.origin);
    if (!agents) {
      agents = this.newAgents(own);
      this.originAgents.set(url.origin, agents);
    }
    return agents;
  }

  /** Signs and POSTs `post.body` (webhook-id, webhook-timestamp, webhook-signature). */
  postSigned(post: SignedPost): Promise<HttpOutcome> {
    return this.postJson(post.url, post.body, { ...signatureHeaders(post.secret, post.id, post.timestampSeconds, post.body) });
  }

  /** POSTs a JSON body with extra headers; never throws, every failure is an outcome. */
  async postJson(target: string, body: PostBody, headers: Record<string, string>): Promise<HttpOutcome> {
    const started = performance.now();
    const outcome = (status: number | null, error: string | null, responseText = '', unreachable = false): HttpOutcome => ({
      ok: error === null,
      status,
      error: error === null ? null : error.slice(0, MAX_ERROR_TEXT),
      responseText,
      durationMs: Math.round(performance.now() - started),
      unreachable,
    });
    const checked = this.check(target);
    if ('refused' in checked) return outcome(null, checked.refused);
    try {
      const { status, text } = await this.exchange(checked, body, headers);
      if (status >= 200 && status < 300) return outcome(status, null, text);
      if (status >= 300 && status < 400) return outcome(status, `HTTP ${status}: redirects are not followed`, text);
      return outcome(status, `HTTP ${status}`, text);
    } catch (err) {
      const status = (err as { status?: number }).status ?? null;
      if ((err as { withdrawn?: boolean }).withdrawn === true) return { ...outcome(null, describe(err)), withdrawn: true };
      return outcome(status, describe(err), '', answeredNothing(err, status));
    }
  }

  /**
   * Ends the requests to `origin` (null: to any origin) that still wait for a connection or are
   * still connecting, each with a `withdrawn` outcome (nothing was sent: its job was not
   * attempted); those under way go on. Returns how many.
   */
  withdraw(origin: string | null): number {
    let withdrawn = 0;
    for (const [req, live] of this.live) {
      if ((origin !== null && live.origin !== origin) || (live.socket !== null && !live.socket.connecting)) continue;
      const err = Object.assign(new Error('withdrawn before it was sent'), { withdrawn: true });
      live.fail(err);
      req.destroy(err);
      withdrawn += 1;
    }
    return withdrawn;
  }

  /**
   * The request options of a target URL, or why it is refused, worked out once per URL (and
   * again when the allowed networks change): every delivery to a webhook has the same URL.
   */
  private check(target: string): Target | { refused: string } {
    const allow = this.options.allowNetworks();
    if (allow !== this.checkedFor) {
      this.checked.clear();
      this.checkedFor = allow;
    }
    let known = this.checked.get(target);
    if (known === undefined) {
      try {
        const url = parseTargetUrl(target);
        // A literal address is dialled without a lookup: check it here.
        const host = bareHost(url);
        const why = isIpLiteral(host) ? refusedAddress(host, allow) : null;
        const secure = url.protocol === 'https:';
        known = why
          ? { refused: refusedTarget(`refused to connect to ${host}: ${why}`) }
          : { https: secure, origin: url.origin, options: { ...urlToHttpOptions(url), agent: this.agentsOf(url)[secure ? 'https' : 'http'] } };
      } catch (err) {
        known = { refused: (err as Error).message };
      }
      this.checked.set(target, known);
    }
    return known;
  }

  /**
   * Closes every pooled connection: requests under way end with a failed outcome, those still
   * waiting for a connection are withdrawn (not attempted).
   */
  close(): void {
    this.withdraw(null);
    for (const req of this.live.keys()) req.destroy(new Error('the HTTP client closed'));
    for (const agents of [this.agents, ...this.originAgents.values()]) {
      agents.http.destroy();
      agents.https.destroy();
    }
  }

  private exchange(target: Target, body: PostBody, headers: Record<string, string>): Promise<{ status: number; text: string }> {
    const { timeoutMs, keepResponseBytes, drainResponseBytes } = this.settings;
    const payload = typeof body === 'string' ? [Buffer.from(body, 'utf8')] : Buffer.isBuffer(body) ? [body] : body;
    let length = 0;
    for (const part of payload) length += part.length;
    return new Promise((resolve, reject) => {
      const req = (target.https ? https : http).request({
        ...target.options,
        method: 'POST',
        lookup: this.lookup,
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': String(length),
          'user-agent': this.options.userAgent ?? 'Postilion-Webhooks/1',
        },
      });
      let status: number | undefined;
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        this.live.delete(req);
      };
      const fail = (err: Error) => {
        done();
        reject(Object.assign(err, { status }));
        // The origin answered nothing: the requests queued behind this one would each dial it and
        // fail the same way (a down endpoint refuses at once), spending an attempt apiece. They
        // come back not attempted, before the pool hands them the connection this one freed.
        if (answeredNothing(err, status ?? null)) this.withdraw(target.origin);
      };
      const live: Live = { origin: target.origin, socket: null, fail };
      this.live.set(req, live);
      req.on('error', fail);
      req.on('socket', (socket: Socket) => {
        live.socket = socket;
        // Timed from here: a request waiting for one of the origin's connections is not.
        timer = setTimeout(() => req.destroy(Object.assign(new Error(`timed out after ${timeoutMs / 1000} s`), { status, timedOut: true })), timeoutMs);
        // Defence in depth: whatever resolved the name, the peer actually reached must pass.
        if (!socket.connecting) return;
        socket.once('connect', () => {
          const why = socket.remoteAddress ? refusedAddress(socket.remoteAddress, this.options.allowNetworks()) : null;
          if (why) req.destroy(new TargetRefusedError(refusedTarget(`refused to connect to ${socket.remoteAddress}: ${why}`)));
        });
      });
      req.on('response', (res) => {
        status = res.statusCode ?? 0;
        const kept: Buffer[] = [];
        let keptBytes = 0;
        let seen = 0;
        res.on('data', (chunk: Buffer) => {
          seen += chunk.length;
          if (keptBytes < keepResponseBytes) {
            const part = chunk.subarray(0, keepResponseBytes - keptBytes);
            kept.push(part);
            keptBytes += part.length;
          }
          // The answer is known; a receiver streaming without end is not read forever.
          if (seen > drainResponseBytes) {
            done();
            res.destroy();
            resolve({ status: status!, text: Buffer.concat(kept).toString('utf8') });
          }
        });
        res.on('end', () => {
          done();
          resolve({ status: status!, text: Buffer.concat(kept).toString('utf8') });
        });
        res.on('error', fail);
      });
      for (const part of payload) req.write(part);
      req.end();
    });
  }

  /**
   * The agents' DNS lookup: the configured resolver, and the target rules applied to every
   * address found. A name with any refused address is refused as a whole, as when it was saved.
   */
  private readonly lookup = (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    const found = isIpLiteral(hostname)
      ? Promise.resolve([hostname])
      : isLocalName(hostname)
        ? Promise.resolve(['127.0.0.1', '::1'])
        : this.options.resolver.addresses(hostname);
    found.then(
      (addresses) => {
        const family = options.family === 4 || options.family === 6 ? options.family : 0;
        const list = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })).filter((a) => family === 0 || a.family === family);
        if (list.length === 0) return callback(lookupError(`${hostname} has no usable address`, 'ENOTFOUND'), '');
        const allow = this.options.allowNetworks();
        for (const a of list) {
          const why = refusedAddress(a.address, allow);
          if (why) return callback(lookupError(refusedTarget(`refused to connect to ${hostname}: it resolves to ${a.address}, ${why}`), 'ETARGETREFUSED'), '');
        }
        if (options.all) callback(null, list);
        else callback(null, list[0]!.address, list[0]!.family);
      },
      (err: Error) => callback(lookupError(`could not resolve ${hostname}: ${err.message}`, 'EAI_AGAIN'), ''),
    );
  };
}

function lookupError(message: string, code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

/**
 * Whether a failed request found its origin answering nothing at all (refused, reset, not
 * resolved): the origin is down. A timeout or a bad status is an ordinary failed attempt, and a
 * target refused by the address rules is not the origin's doing.
 */
function answeredNothing(err: unknown, status: number | null): boolean {
  const e = err as NodeJS.ErrnoException & { timedOut?: boolean; withdrawn?: boolean };
  if (status !== null || e.timedOut === true || e.withdrawn === true) return false;
  return !(err instanceof TargetRefusedError || e.code === 'ETARGETREFUSED');
}

function describe(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  if (e.code && !e.message.includes(e.code)) return `${e.message} (${e.code})`;
  return e.message || String(err);
}
