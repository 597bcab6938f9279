import ipaddr from 'ipaddr.js';
import { isIP } from 'node:net';
import { cidrContains, type Cidr } from '../util/cidr.ts';

/**
 * Which addresses an HTTP POST (webhook, route) may be sent to: public unicast only, unless the
 * operator allows a network (`webhooks.allow_networks`). The same rule runs when a URL is saved
 * and when a connection is made, against the address actually dialled.
 */

/** The setting that lets webhook and route URLs into a refused network (routes share it). */
export const ALLOW_NETWORKS_SETTING = 'webhooks.allow_networks';

/** A refusal by the address rules, ending with the setting that would allow the target. */
export function refusedTarget(text: string): string {
  return `${text}; such targets are refused unless the operator lists their network in ${ALLOW_NETWORKS_SETTING}`;
}

/** Why ipaddr.js's range names are refused, in words an API client understands. */
const REFUSED_RANGES: Record<string, string> = {
  unspecified: 'an unspecified address',
  broadcast: 'a broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT (CGNAT) address',
  private: 'a private address',
  uniqueLocal: 'a private (unique local) address',
  reserved: 'a reserved address',
};

/**
 * Null when `address` (an IP literal) may be dialled, else why not ("a loopback address").
 * IPv4-mapped IPv6 is judged as the IPv4 address it carries. Everything that is not plain
 * public unicast is refused (NAT64, 6to4, Teredo, documentation and benchmarking ranges too),
 * unless an allowed network contains it.
 */
export function refusedAddress(address: string, allow: readonly Cidr[]): string | null {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.parse(address.replace(/^\[|\]$/g, '').replace(/%.*$/, ''));
  } catch {
    return 'not an IP address';
  }
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  if (allow.some((cidr) => cidrContains(cidr, ip))) return null;
  const range = ip.range();
  // ::a.b.c.d (IPv4-compatible, deprecated by RFC 4291) is "unicast" to ipaddr.js.
  if (range === 'unicast' && ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).parts.slice(0, 6).every((part) => part === 0))
    return 'a deprecated IPv4-compatible IPv6 address';
  if (range === 'unicast') return null;
  return REFUSED_RANGES[range] ?? `a special-purpose address (${range})`;
}

/** The host of a URL without IPv6 brackets. */
export function bareHost(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

export function isIpLiteral(host: string): boolean {
  return isIP(host) !== 0;
}

/** Names that never leave the machine whatever DNS says (RFC 6761 §6.3). */
export function isLocalName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}
