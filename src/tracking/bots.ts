import { isbot } from 'isbot';
import ipaddr from 'ipaddr.js';
import { Lru } from '../util/lru.ts';

/** What is known of one open or click, to tell a person from a machine. */
export interface Hit {
  userAgent: string;
  ip: string;
  /** When the message was delivered (ms), or null. */
  deliveredAt: number | null;
  at: number;
}

/** Apple's own network, from which Mail Privacy Protection fetches every image of a message. */
const APPLE = ipaddr.parseCIDR('17.0.0.0/8');
/** Image proxies of mailbox providers: they fetch the pixel whoever opens (or before anyone does). */
const IMAGE_PROXIES = /GoogleImageProxy|ggpht\.com|YahooMailProxy|Yahoo! ?Slurp|OutlookProxy|Mail\.RU_Bot/i;

/**
 * Why a hit looks automated, or null when it looks like a person. Flagged hits are still
 * recorded and sent to webhooks (`is_bot: true`); only the statistics leave them out.
 *  - no user agent, or one `isbot` knows (crawlers, scanners, HTTP libraries);
 *  - mailbox providers' image proxies (Google, Yahoo) and Apple Mail Privacy Protection (Apple's
 *    17.0.0.0/8, or its bare `Mozilla/5.0` agent);
 *  - anything within `scannerMs` of delivery: receiving systems' link scanners fetch at once.
 */
export function botReason(hit: Hit, scannerMs: number): string | null {
  const ua = hit.userAgent.trim();
  if (ua === '') return 'no user agent';
  const agent = agentOf(ua);
  if (agent === 'proxy') return 'mailbox image proxy';
  if (isApple(hit.ip) || ua === 'Mozilla/5.0') return 'Apple Mail Privacy Protection';
  if (agent === 'bot') return 'bot user agent';
  if (hit.deliveredAt !== null && hit.at - hit.deliveredAt < scannerMs) return 'within seconds of delivery';
  return null;
}

/** User agents recently judged (a handful of browsers make most hits), at most this many. */
const agents = new Lru<string, 'proxy' | 'bot' | 'person'>(2_000);

/** What a user agent says it is; `isbot` runs one large expression, so verdicts are kept. */
function agentOf(ua: string): 'proxy' | 'bot' | 'person' {
  let verdict = agents.get(ua);
  if (verdict === undefined) {
    verdict = IMAGE_PROXIES.test(ua) ? 'proxy' : isbot(ua) ? 'bot' : 'person';
    agents.set(ua, verdict);
  }
  return verdict;
}

function isApple(ip: string): boolean {
  // Only an IPv4 address (or one mapped into IPv6) can be in 17.0.0.0/8: no parse for the rest.
  if (!ip.startsWith('17.') && !ip.includes(':')) return false;
  try {
    const parsed = ipaddr.process(ip);
    return parsed.kind() === 'ipv4' && (parsed as ipaddr.IPv4).match(APPLE);
  } catch {
    return false;
  }
}
