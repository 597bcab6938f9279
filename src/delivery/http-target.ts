import type { Cidr } from '../util/cidr.ts';
import { bareHost, isIpLiteral, isLocalName, refusedAddress } from './target-address.ts';

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
 * A name that resolves to nothing is refused too: it could be pointed anywhere later, and the
 * connect-time check is what stops that, but a typo is better caught now.
 */
export async function checkTargetUrl(text: string, resolver: HostResolver, allow: readonly Cidr[]): Promise<URL> {
  const url = parseTargetUrl(text);
  const host = bareHost(url);
  if (isIpLiteral(host)) {
    const why = refusedAddress(host, allow);
    if (why) throw new TargetRefusedError(`url host ${url.hostname} is ${why}; such targets are refused`);
    return url;
  }
  if (isLocalName(host) && !allowsLoopback(allow)) throw new TargetRefusedError(`url host ${host} is a loopback name; such targets are refused`);
  let addresses: string[];
  try {
    addresses = await resolver.addresses(host);
  } catch (err) {
    throw new TargetRefusedError(`url host ${host} could not be resolved (${(err as Error).message})`);
  }
  if (addresses.length === 0) throw new TargetRefusedError(`url host ${host} has no A or AAAA record`);
  for (const address of addresses) {
    const why = refusedAddress(address, allow);
    if (why) throw new TargetRefusedError(`url host ${host} resolves to ${address}, ${why}; such targets are refused`);
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
