import { isbot } from 'isbot';
import ipaddr from 'ipaddr.js';

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
  if (IMAGE_PROXIES.test(ua)) return 'mailbox image proxy';
  if (isApple(hit.ip) || ua === 'Mozilla/5.0') return 'Apple Mail Privacy Protection';
  if (isbot(ua)) return 'bot user agent';
  if (hit.deliveredAt !== null && hit.at - hit.deliveredAt < scannerMs) return 'within seconds of delivery';
  return null;
}

function isApple(ip: string): boolean {
  try {
    const parsed = ipaddr.process(ip);
    return parsed.kind() === 'ipv4' && (parsed as ipaddr.IPv4).match(APPLE as [ipaddr.IPv4, number]);
  } catch {
    return false;
  }
}
