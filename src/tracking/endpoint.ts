import type { DomainRecord } from '../store/records.ts';
import type { Cidr } from '../util/cidr.ts';
import { parseClientIp } from '../util/cidr.ts';
import { forwardedClient } from '../util/forwarded.ts';
import { andThen, type Maybe } from '../util/maybe.ts';
import type { TrackingLinks } from '../message/send.ts';
import type { TrackingUrls } from '../message/tracking.ts';
import type { LeanAnswer, LeanRequest } from './lean-http.ts';
import type { MessageFacts, ThreadHit } from './thread-protocol.ts';
import type { TrackingTokens } from './tokens.ts';

/** The open pixel: a transparent 1×1 GIF. */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const NO_CACHE = 'Cache-Control: no-store, no-cache, must-revalidate, max-age=0\r\nPragma: no-cache\r\nExpires: 0\r\n';
const PIXEL_ANSWER: LeanAnswer = { status: 200, headers: `Content-Type: image/gif\r\nContent-Length: ${PIXEL.length}\r\n${NO_CACHE}`, body: PIXEL };
/** What a Location header may hold as it is: visible ASCII (a link with anything else is sent percent-encoded). */
const LOCATION = /^[\x21-\x7e]+$/;
const PATH = /^\/(o|c)\/([A-Za-z0-9_-]{1,64})\/?$/;
/** Where an MTA-STS policy is fetched (RFC 8461 §3.3). */
const MTA_STS_PATH = '/.well-known/mta-sts.txt';
/** A user agent is kept to this many characters in events. */
const MAX_USER_AGENT = 512;

export interface EndpointDeps {
  tokens: TrackingTokens;
  /** The id of the domain whose tracking host this is (`<tracking_subdomain>.<domain>`, lower case), or null. */
  domainOfHost(host: string): Maybe<string | null>;
  /** What message `id` is, or null (unknown, or not outbound mail). */
  facts(id: string): Maybe<MessageFacts | null>;
  /** The URL link `index` of message `id` points at, or null. */
  link(id: string, index: number): Maybe<string | null>;
  /** Takes an answered hit to be recorded; a promise only when too many are waiting. */
  hit(hit: ThreadHit): Maybe<void>;
  /** Peers whose X-Forwarded-For is believed (api.trusted_proxies, read per request). */
  trustedProxies: () => readonly Cidr[];
  /** The MTA-STS policy file published for a host (`mta-sts.<domain>`, mta_sts_policy), or null. */
  mtaStsPolicy?: (host: string) => string | null;
}

/**
 * The tracking listener's requests. It answers only for `<tracking_subdomain>.<domain>` of a
 * known domain, and only tokens that verify and name a tracked message of that domain:
 * `GET /o/<token>` is a 1×1 GIF that no one caches; `GET /c/<token>` a 302 to the link stored
 * for the message at acceptance. Everything else is a 404 (405 for other methods), so the
 * endpoint can never be turned into an open redirect.
 *
 * What a request needs is mostly known already (the deps keep it): each step goes on at once
 * then, and waits only for what must be asked (andThen).
 */
export function trackingEndpoint(deps: EndpointDeps): (req: LeanRequest) => Maybe<LeanAnswer> {
  return (req) => handle(deps, req);
}

function handle(deps: EndpointDeps, req: LeanRequest): Maybe<LeanAnswer> {
  if (req.method !== 'GET' && req.method !== 'HEAD') return plain(405, 'method not allowed', 'Allow: GET, HEAD\r\n');
  const path = req.target.split('?')[0]!;
  if (path === MTA_STS_PATH) return mtaStsAnswer(deps, req);
  const m = PATH.exec(path);
  if (!m) return plain(404, 'not found');
  const host = trackingHost(req.host);
  if (host === null) return plain(404, 'unknown host');
  return andThen(deps.domainOfHost(host), (domainId) => {
    if (domainId === null) return plain(404, 'unknown host');
    const token = m[2]!;
    const client = clientOf(req, deps.trustedProxies());
    if (client === null) return plain(400, 'unreadable X-Forwarded-For');
    if (m[1] === 'o') {
      const read = deps.tokens.readOpen(token);
      if (!read) return plain(404, 'not found');
      return andThen(deps.facts(read.messageId), (facts) => {
        if (!tracks(facts, domainId, 'open')) return plain(404, 'not found');
        return andThen(deps.hit({ id: read.messageId, kind: 'open', ...client }), () => PIXEL_ANSWER);
      });
    }
    const read = deps.tokens.readClick(token);
    if (!read) return plain(404, 'not found');
    return andThen(deps.facts(read.messageId), (facts) => {
      if (!tracks(facts, domainId, 'click')) return plain(404, 'not found');
      return andThen(deps.link(read.messageId, read.index), (url) => {
        const location = url === null ? null : locationOf(url);
        if (location === null) return plain(404, 'not found');
        return andThen(deps.hit({ id: read.messageId, kind: 'click', ...client, url: url! }), () => ({
          status: 302,
          headers: `Location: ${location}\r\nContent-Length: 0\r\n${NO_CACHE}Referrer-Policy: no-referrer\r\n`,
          body: null,
        }));
      });
    });
  });
}

/** The published MTA-STS policy of the host asked for (text/plain, RFC 8461 §3.3), or 404. */
function mtaStsAnswer(deps: EndpointDeps, req: LeanRequest): LeanAnswer {
  const host = trackingHost(req.host);
  const text = host === null ? null : (deps.mtaStsPolicy?.(host) ?? null);
  if (text === null) return plain(404, 'not found');
  const body = Buffer.from(text, 'utf8');
  return { status: 200, headers: `Content-Type: text/plain\r\nContent-Length: ${body.length}\r\nCache-Control: max-age=300\r\n`, body };
}

/** A stored link as a Location header: as it is when it is visible ASCII, else as the WHATWG URL parser writes it; null when neither is. */
function locationOf(url: string): string | null {
  if (LOCATION.test(url)) return url;
  try {
    const href = new URL(url).href;
    return LOCATION.test(href) ? href : null;
  } catch {
    return null;
  }
}

/** Whether the message is one of the domain's, tracked that way. */
function tracks(facts: MessageFacts | null, domainId: string, kind: 'open' | 'click'): boolean {
  return facts !== null && facts.domainId === domainId && (kind === 'open' ? facts.open : facts.click);
}

/** The host name a request names (`Host`, lower case, port and trailing dot dropped), or null. */
function trackingHost(host: string | undefined): string | null {
  if (!host || host.length > 300) return null;
  const name = host.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
  return name.indexOf('.') > 0 ? name : null;
}

/** The domain a tracking host (`<tracking_subdomain>.<domain>`) is of, given a lookup of domains by name. */
export async function domainOfTrackingHost(host: string, byName: (name: string) => Promise<DomainRecord | undefined>): Promise<string | null> {
  const dot = host.indexOf('.');
  if (dot <= 0) return null;
  const domain = await byName(host.slice(dot + 1));
  return domain && domain.trackingSubdomain === host.slice(0, dot) ? domain.id : null;
}

/** Each connection's peer address, parsed once (a browser sends many requests on one connection). */
const peers = new WeakMap<object, { ip: Exclude<ReturnType<typeof parseClientIp>, null>; text: string } | null>();

function clientOf(req: LeanRequest, trusted: readonly Cidr[]): { ip: string; userAgent: string } | null {
  let peer = peers.get(req.socket);
  if (peer === undefined) {
    const ip = parseClientIp(req.socket.remoteAddress ?? '');
    peer = ip ? { ip, text: ip.toString() } : null;
    peers.set(req.socket, peer);
  }
  if (!peer) return null;
  const userAgent = req.userAgent === undefined ? '' : req.userAgent.slice(0, MAX_USER_AGENT);
  if (req.forwardedFor === undefined || trusted.length === 0) return { ip: peer.text, userAgent };
  const found = forwardedClient(peer.ip, req.forwardedFor, trusted);
  if (typeof found === 'string') return null;
  return { ip: found === peer.ip ? peer.text : found.toString(), userAgent };
}

function plain(status: number, text: string, headers = ''): LeanAnswer {
  const body = Buffer.from(text, 'utf8');
  return { status, headers: `Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${body.length}\r\nCache-Control: no-store\r\n${headers}`, body };
}

/** The tracking URLs of a domain's mail: `<scheme>://<tracking_subdomain>.<domain>/o|c/<token>`. */
export class TrackingUrlMaker implements TrackingLinks {
  constructor(
    private readonly tokens: TrackingTokens,
    private readonly scheme: 'http' | 'https',
  ) {}

  urls(domain: DomainRecord): TrackingUrls {
    const base = `${this.scheme}://${domain.trackingSubdomain}.${domain.name}`;
    return {
      open: (id) => `${base}/o/${this.tokens.open(id)}`,
      click: (id, index) => `${base}/c/${this.tokens.click(id, index)}`,
    };
  }
}
