import type { Cidr } from '../util/cidr.ts';
import { bareHost, isIpLiteral, isLocalName, refusedAddress, refusedTarget } from './target-address.ts';

/** Longer URLs are refused: no receiver needs them, and they are stored and shown on every read. */
export const MAX_TARGET_URL_LENGTH = 2048;

/** Resolves a host name to its IPv4 and IPv6 addresses (the configured resolver, `dns.servers`). */
export interface HostResolver {
  addresses(name: string): Promise<string[]>;
}

/** A URL an HTTP POST may not go to; the message is meant for the API client. */
export class TargetRefusedError extends Error {
  override name = 'TargetRefusedError';
}

/**
 * Checks a webhook or route URL before it is saved: an absolute http(s) URL without
 * credentials, whose host is (or every address it resolves to is) a public unicast address or
 * inside an allowed network. Returns the parsed URL; throws TargetRefusedError otherwise.
 * A name that does not resolve (yet) is accepted: the endpoint's DNS is often published after
 * the webhook or route is set up, and every address is checked again when it is dialled
 * (HttpClient's lookup and connect), which is what stops a name pointed somewhere refused later.
 */
export async function checkTargetUrl(text: string, resolver: HostResolver, allow: readonly Cidr[]): Promise<URL> {
  const url = parseTargetUrl(text);
  const host = bareHost(url);
  if (isIpLiteral(host)) {
    const why = refusedAddress(host, allow);
    if (why) throw new TargetRefusedError(refusedTarget(`url host ${url.hostname} is ${why}`));
    return url;
  }
  if (isLocalName(host) && !allowsLoopback(allow)) throw new TargetRefusedError(refusedTarget(`url host ${host} is a loopback name`));
  let addresses: string[];
  try {
    addresses = await resolver.addresses(host);
  } catch {
    // Unanswered (SERVFAIL, timeout): as good as not published yet; the dial decides.
    return url;
  }
  for (const address of addresses) {
    const why = refusedAddress(address, allow);
    if (why) throw new TargetRefusedError(refusedTarget(`url host ${host} resolves to ${address}, ${why}`));
  }
  return url;
}

/** The syntactic half of checkTargetUrl (no DNS). */
export function parseTargetUrl(text: string): URL {
  if (text.length > MAX_TARGET_URL_LENGTH) throw new TargetRefusedError(`url must be at most ${MAX_TARGET_URL_LENGTH} characters`);
  if (/[\u0000-\u0020\u007f]/.test(text)) throw new TargetRefusedError('url must not contain spaces or control characters');
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new TargetRefusedError('url must be an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TargetRefusedError(`url scheme ${url.protocol.replace(/:$/, '')} is not allowed; use http or https`);
  }
  if (url.hostname === '') throw new TargetRefusedError('url must name a host');
  if (url.username !== '' || url.password !== '') {
    throw new TargetRefusedError('url must not contain a user name or password (requests are signed instead)');
  }
  return url;
}

function allowsLoopback(allow: readonly Cidr[]): boolean {
  return refusedAddress('127.0.0.1', allow) === null || refusedAddress('::1', allow) === null;
}
