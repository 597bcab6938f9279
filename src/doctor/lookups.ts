import { Resolver } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import type { Config } from '../config/schema.ts';
import { createResolver, DnsUnavailableError, resolverName as nameResolver, stripDot, type DnsResolver } from '../domains/resolver.ts';
import { codeOf } from './check.ts';

/** What one DNS question got: the answers (empty: no such record), or why it got none. */
export type Answer = { values: string[] } | { error: string };

/** Codes that mean "no such record", as src/domains/resolver.ts reads them. */
const ABSENT = new Set(['ENOTFOUND', 'ENODATA', 'NXDOMAIN', 'ENONAME']);

/**
 * The DNS questions the doctor asks, through the resolvers the daemon uses (dns.servers, with
 * its timeout and tries). Failures are answers here: each carries the resolver's error code.
 */
export interface Lookups {
  /** The resolvers asked, for the operator: "dns.servers 127.0.0.1:5353", or the system's. */
  readonly via: string;
  txt(name: string): Promise<Answer>;
  cname(name: string): Promise<Answer>;
  mx(name: string): Promise<Answer>;
  addresses(name: string): Promise<Answer>;
  /** PTR names of an address. */
  reverse(ip: string): Promise<Answer>;
}

/** Who answers: the configured resolvers, else the system's (as /etc/resolv.conf names them). */
export function resolverName(config: Config): string {
  return nameResolver(config.dns.servers);
}

export function createLookups(config: Config): Lookups {
  const options = { servers: config.dns.servers, timeoutMs: config.dns.timeout_ms, tries: config.dns.tries };
  const resolver: DnsResolver = createResolver(options);
  // Reverse lookups are not among the daemon's questions: the same servers, asked directly.
  const raw = new Resolver({ timeout: options.timeoutMs, tries: options.tries });
  if (options.servers.length > 0) raw.setServers(options.servers);
  const answer = async (ask: () => Promise<string[]>): Promise<Answer> => {
    try {
      return { values: await ask() };
    } catch (err) {
      // The daemon's resolver says "DNS lookup failed: <code>"; anything else names its code.
      if (err instanceof DnsUnavailableError) return { error: err.message };
      return { error: `DNS lookup failed: ${codeOf(err)}` };
    }
  };
  return {
    via: resolverName(config),
    txt: (name) => answer(() => resolver.txt(name)),
    cname: (name) => answer(() => resolver.cname(name)),
    mx: (name) => answer(async () => (await resolver.mx(name)).map((mx) => mx.exchange)),
    addresses: (name) => answer(() => resolver.addresses(name)),
    reverse: (ip) =>
      answer(async () => {
        try {
          // resolvePtr, not reverse(): reverse() reports every failure as ENOTFOUND.
          return (await raw.resolvePtr(reverseName(ip))).map(stripDot);
        } catch (err) {
          if (ABSENT.has(codeOf(err))) return [];
          throw err;
        }
      }),
  };
}

/** The name a PTR question asks for: 10.2.0.192.in-addr.arpa, or the nibbles under ip6.arpa. */
export function reverseName(ip: string): string {
  const addr = ipaddr.process(ip);
  const bytes = addr.toByteArray().reverse();
  if (addr.kind() === 'ipv4') return `${bytes.join('.')}.in-addr.arpa`;
  return `${bytes
    .flatMap((b) => [b & 0xf, b >> 4])
    .map((n) => n.toString(16))
    .join('.')}.ip6.arpa`;
}
