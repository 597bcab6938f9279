import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DomainsRepo } from '../store/domains-repo.ts';
import type { DomainRecord } from '../store/records.ts';
import type { Cidr } from '../util/cidr.ts';
import { parseClientIp } from '../util/cidr.ts';
import { forwardedClient } from '../util/forwarded.ts';
import type { TrackingLinks } from '../message/send.ts';
import type { TrackingUrls } from '../message/tracking.ts';
import type { TrackingHits } from './hits.ts';
import type { TrackingTokens } from './tokens.ts';

/** The open pixel: a transparent 1×1 GIF. */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const NO_CACHE = { 'Cache-Control': 'no-store, no-cache, must-revalidate, max-age=0', Pragma: 'no-cache', Expires: '0' };
const PATH = /^\/(o|c)\/([A-Za-z0-9_-]{1,64})\/?$/;

export interface EndpointDeps {
  domains: DomainsRepo;
  tokens: TrackingTokens;
  hits: TrackingHits;
  /** Peers whose X-Forwarded-For is believed (api.trusted_proxies, read per request). */
  trustedProxies: () => readonly Cidr[];
  onError: (err: unknown) => void;
}

/**
 * The tracking listener's requests. It answers only for `<tracking_subdomain>.<domain>` of a
 * known domain, and only tokens that verify and name a tracked message of that domain:
 * `GET /o/<token>` is a 1×1 GIF that no one caches; `GET /c/<token>` a 302 to the link stored
 * for the message at acceptance. Everything else is a 404 (405 for other methods), so the
 * endpoint can never be turned into an open redirect.
 */
export function trackingEndpoint(deps: EndpointDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handle(deps, req, res).catch((err) => {
      deps.onError(err);
      if (!res.headersSent) plain(res, 500, 'internal error');
      else res.destroy();
    });
  };
}

async function handle(deps: EndpointDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') return plain(res, 405, 'method not allowed', { Allow: 'GET, HEAD' });
  const path = (req.url ?? '').split('?')[0]!;
  const m = PATH.exec(path);
  if (!m) return plain(res, 404, 'not found');
  const domain = await trackingDomain(deps.domains, req.headers.host);
  if (!domain) return plain(res, 404, 'unknown host');
  const kind = m[1] === 'o' ? 'open' : 'click';
  const token = m[2]!;
  const client = clientOf(req, deps.trustedProxies());
  if (client === null) return plain(res, 400, 'unreadable X-Forwarded-For');
  if (kind === 'open') {
    const read = deps.tokens.readOpen(token);
    const message = read && (await deps.hits.message(domain, read.messageId, 'open'));
    if (!message) return plain(res, 404, 'not found');
    await deps.hits.hit(message, 'open', client);
    res.writeHead(200, { 'Content-Type': 'image/gif', 'Content-Length': PIXEL.length, ...NO_CACHE });
    res.end(req.method === 'HEAD' ? undefined : PIXEL);
    return;
  }
  const read = deps.tokens.readClick(token);
  const message = read && (await deps.hits.message(domain, read.messageId, 'click'));
  const url = message && read ? await deps.hits.link(message.id, read.index) : null;
  if (!message || !url) return plain(res, 404, 'not found');
  await deps.hits.hit(message, 'click', client, url);
  res.writeHead(302, { Location: url, 'Content-Length': 0, ...NO_CACHE, 'Referrer-Policy': 'no-referrer' });
  res.end();
}

/** The domain whose tracking host the request names (`Host`, port dropped), or null. */
async function trackingDomain(domains: DomainsRepo, host: string | undefined): Promise<DomainRecord | null> {
  if (!host || host.length > 300) return null;
  const name = host.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
  const dot = name.indexOf('.');
  if (dot <= 0) return null;
  const domain = await domains.getByName(name.slice(dot + 1));
  return domain && domain.trackingSubdomain === name.slice(0, dot) ? domain : null;
}

function clientOf(req: IncomingMessage, trusted: readonly Cidr[]): { ip: string; userAgent: string } | null {
  const peer = parseClientIp(req.socket.remoteAddress ?? '');
  if (!peer) return null;
  const header = req.headers['x-forwarded-for'];
  const found = forwardedClient(peer, Array.isArray(header) ? header.join(',') : header, trusted);
  if (typeof found === 'string') return null;
  const ua = req.headers['user-agent'];
  return { ip: found.toString(), userAgent: typeof ua === 'string' ? ua : '' };
}

function plain(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store', ...headers });
  res.end(text);
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
