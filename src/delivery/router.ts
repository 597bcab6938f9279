import { isIP } from 'node:net';
import type { Classification } from '../bounce/rules.ts';
import { DnsUnavailableError, type DnsResolver } from '../domains/resolver.ts';
import { Lru } from '../util/lru.ts';
import type { Clock } from '../util/time.ts';
import type { HopPolicy } from './tls-policy/tls-policies.ts';

export type TlsPolicy = 'required' | 'opportunistic' | 'off';

/** One place to try: an address and port, with the name it came from (MX host) for logs and TLS. */
export interface Hop {
  name: string;
  address: string;
  port: number;
  tls: TlsPolicy;
  /** A transport or smarthost host, not an MX host: the receiving domain's TLS policies do not apply. */
  relay?: true | undefined;
  /** The receiving domain's TLS policy for this hop (MTA-STS, DANE), set by TlsPolicies.plan. */
  policy?: HopPolicy | undefined;
}

/** Why a destination has no hop to try. */
export interface RouteFailure {
  permanent: boolean;
  classification: Classification;
  text: string;
}

export interface TargetConfig {
  host: string;
  port: number;
  tls?: TlsPolicy | undefined;
}

export interface RouterOptions {
  mxPort: number;
  tls: TlsPolicy;
  transport: Record<string, TargetConfig>;
  smarthost: TargetConfig | null;
  unreachableMs: number;
  /** How long an MX answer is reused. */
  cacheMs: number;
}

/** The options of the `delivery` configuration (config/schema.ts) the router reads. */
export interface DeliveryRoutingConfig {
  mx_port: number;
  tls: TlsPolicy;
  transport: Record<string, TargetConfig>;
  smarthost: TargetConfig | null;
  unreachable_seconds: number;
}

/** The router's options from the `delivery` configuration. */
export function routerOptions(d: DeliveryRoutingConfig): RouterOptions {
  return {
    mxPort: d.mx_port,
    tls: d.tls,
    transport: Object.fromEntries(Object.entries(d.transport).map(([domain, target]) => [domain.toLowerCase(), target])),
    smarthost: d.smarthost,
    unreachableMs: d.unreachable_seconds * 1000,
    cacheMs: 60_000,
  };
}

/** Domains whose MX answer is kept at most, and hops marked unreachable. */
const DOMAINS_KEPT = 10_000;

/**
 * Where mail for a domain goes: the transport map, else the smarthost, else its MX hosts in
 * preference order (equal preferences shuffled), the domain itself when it has no MX (implicit
 * MX), nothing when it publishes a null MX (RFC 7505). Hosts found unreachable are skipped
 * for a while, unless nothing else is left.
 */
export class Router {
  /**
   * Per domain, its hops and until when they are reused. An answer past its time stays until it is
   * replaced: after a DNS failure, mxSet still names the domain's last known MX set.
   */
  private readonly mxCache = new Lru<string, { until: number; hops: Hop[] | RouteFailure }>(DOMAINS_KEPT);
  /** Per hop (address:port), until when it is skipped. */
  private readonly unreachable = new Lru<string, number>(DOMAINS_KEPT);

  constructor(
    private readonly resolver: DnsResolver,
    private readonly options: RouterOptions,
    private readonly clock: Clock,
  ) {}

  /** The hops to try in order, or why there are none. */
  async hops(domain: string): Promise<Hop[] | RouteFailure> {
    const now = this.clock.now();
    const cached = this.mxCache.get(domain);
    let found: Hop[] | RouteFailure;
    if (cached && cached.until > now) {
      found = cached.hops;
    } else {
      found = await this.resolve(domain);
      // A DNS failure is not kept: the next message asks again.
      if (Array.isArray(found) || found.permanent) this.mxCache.set(domain, { until: now + this.options.cacheMs, hops: found });
    }
    if (!Array.isArray(found)) return found;
    const reachable = found.filter((hop) => (this.unreachable.get(hopKey(hop)) ?? 0) <= now);
    return reachable.length > 0 ? reachable : found;
  }

  /**
   * The MX set of a domain: its mail hosts' names, sorted and joined with commas, so every domain
   * a provider hosts shares one set of limits. The domain itself when it has none to name (a DNS
   * failure, a null MX).
   */
  async mxSet(domain: string): Promise<string> {
    await this.hops(domain);
    const found = this.mxCache.get(domain)?.hops;
    if (!Array.isArray(found) || found.length === 0) return domain;
    return [...new Set(found.map((hop) => hop.name.toLowerCase()))].sort().join(',');
  }

  /**
   * The MX set a domain's mail is filed under (mxSet), or why its mail has nowhere to go: what
   * the operator's `queue suspend <domain>` names.
   */
  async destination(domain: string): Promise<string | RouteFailure> {
    const found = await this.hops(domain);
    return Array.isArray(found) ? this.mxSet(domain) : found;
  }

  /** Marks a hop as not answering, so the next messages try the others first. */
  markUnreachable(hop: Hop): void {
    if (this.options.unreachableMs > 0) this.unreachable.set(hopKey(hop), this.clock.now() + this.options.unreachableMs);
  }

  private async resolve(domain: string): Promise<Hop[] | RouteFailure> {
    const fixed = this.options.transport[domain] ?? this.options.smarthost;
    try {
      if (fixed) return (await this.hostHops(fixed.host, fixed.port, fixed.tls ?? this.options.tls)).map((hop) => ({ ...hop, relay: true as const }));
      const mx = await this.resolver.mx(domain);
      if (mx.some((r) => r.exchange === '' || r.exchange === '.')) {
        return { permanent: true, classification: 'BadDomain', text: `${domain} does not accept mail (null MX, RFC 7505)` };
      }
      // No MX: the domain itself is the mail host (RFC 5321 §5.1).
      const hosts = mx.length === 0 ? [domain] : orderByPreference(mx).map((r) => r.exchange);
      const hops: Hop[] = [];
      for (const host of hosts) {
        try {
          hops.push(...(await this.hostHops(host, this.options.mxPort, this.options.tls)));
        } catch (err) {
          if (!(err instanceof DnsUnavailableError)) throw err;
        }
      }
      if (hops.length > 0) return hops;
      return mx.length === 0
        ? { permanent: true, classification: 'BadDomain', text: `${domain} has no MX and no address record` }
        : { permanent: false, classification: 'DNSFailure', text: `no address for any MX host of ${domain} (${hosts.join(', ')})` };
    } catch (err) {
      if (err instanceof DnsUnavailableError) return { permanent: false, classification: 'DNSFailure', text: `${domain}: ${err.message}` };
      throw err;
    }
  }

  private async hostHops(host: string, port: number, tls: TlsPolicy): Promise<Hop[]> {
    const addresses = isIP(host) ? [host] : await this.resolver.addresses(host);
    return addresses.map((address) => ({ name: host, address, port, tls }));
  }
}

function hopKey(hop: Hop): string {
  return `${hop.address}:${hop.port}`;
}

/** Lower preference first; hosts of equal preference in random order (RFC 5321 §5.1). */
function orderByPreference<T extends { priority: number }>(records: T[]): T[] {
  return records
    .map((r) => ({ r, tie: Math.random() }))
    .sort((a, b) => a.r.priority - b.r.priority || a.tie - b.tie)
    .map(({ r }) => r);
}
