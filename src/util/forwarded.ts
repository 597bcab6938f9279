import type ipaddr from 'ipaddr.js';
import { cidrContains, parseClientIp, type Cidr } from './cidr.ts';

type Ip = ipaddr.IPv4 | ipaddr.IPv6;

/**
 * The client behind trusted proxies: X-Forwarded-For walked from the right, past our own proxies,
 * to the first outside hop (the peer itself when it is not trusted). An unreadable hop fails
 * closed: its text is returned, for the caller to refuse the request.
 */
export function forwardedClient(peer: Ip, header: string | undefined, trustedProxies: readonly Cidr[]): Ip | string {
  const trusted = (ip: Ip) => trustedProxies.some((cidr) => cidrContains(cidr, ip));
  if (!trusted(peer)) return peer;
  let client = peer;
  const hops = (header || '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = parseForwardedHop(hops[i]!);
    if (!hop) return hops[i]!;
    client = hop;
    if (!trusted(hop)) break;
  }
  return client;
}

/** An X-Forwarded-For hop: an address, possibly with a port ("192.0.2.1:4711", "[2001:db8::1]:443"). */
function parseForwardedHop(text: string): Ip | null {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(text);
  if (bracketed) return parseClientIp(bracketed[1]!);
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(text);
  return parseClientIp(v4WithPort ? v4WithPort[1]! : text);
}
