import { isIP } from 'node:net';
import type { Config } from '../config/schema.ts';
import type { Router } from '../delivery/router.ts';
import { isValidDomain, normalizeDomain } from '../util/domain-name.ts';
import { badRequest, AppError } from '../util/errors.ts';
import { isPrintable } from '../util/text.ts';
import { laneOf, splitLane } from './lane.ts';

/**
 * What an operator's name (`queue suspend example.org`) means to the job engine: the destination
 * whose jobs wait. Mail is filed under the MX set of its recipient domain, or under the transport
 * or smarthost host that takes it; webhook deliveries and route POSTs under their URL origin. A
 * recipient domain is never a destination of its own, so suspending it as given would hold
 * nothing.
 */
export type DestinationVia =
  /** The name is a destination the engine knows as it is (in memory, configured, or suspended). */
  | 'destination'
  /** A recipient domain, filed under its MX set. */
  | 'mx'
  /** A recipient domain of `delivery.transport`, or one of its hosts. */
  | 'transport'
  /** `delivery.smarthost` takes the domain's mail (or it is the smarthost's host). */
  | 'smarthost'
  /** A URL: its origin. */
  | 'origin';

export interface ResolvedDestination {
  destination: string;
  via: DestinationVia;
}

/** Why a recipient domain's mail has nowhere to go (the router's RouteFailure). */
export interface NoRoute {
  permanent: boolean;
  text: string;
}

/** What the resolution reads: the delivery configuration, what the engine knows, DNS. */
export interface DestinationFacts {
  transport: Readonly<Record<string, { host: string }>>;
  smarthost: { host: string } | null;
  /** Whether the engine knows the name as a destination: in memory, in `delivery.destinations`, or suspended. */
  known(name: string): boolean;
  /** The MX set a recipient domain's mail is filed under, or why it has none. */
  mxSet(domain: string): Promise<string | NoRoute>;
}

/** The facts that do not change while the daemon runs: the delivery configuration and its router. */
export interface DeliveryRouting {
  transport: Readonly<Record<string, { host: string }>>;
  smarthost: { host: string } | null;
  /** The destinations of `delivery.destinations`. */
  configured: readonly string[];
  mxSet(domain: string): Promise<string | NoRoute>;
}

/** The routing the `delivery` configuration and its router give. */
export function deliveryRouting(d: Config['delivery'], router: Pick<Router, 'destination'>): DeliveryRouting {
  return { transport: d.transport, smarthost: d.smarthost, configured: Object.keys(d.destinations), mxSet: (domain) => router.destination(domain) };
}

export type ParsedName =
  | { kind: 'origin'; origin: string }
  /** Several host names, comma-separated: an MX set (sorted, as the engine writes it). */
  | { kind: 'set'; name: string }
  /** One name: a recipient domain, a host, or a destination as queue status shows it. */
  | { kind: 'name'; name: string };

const HOST = /^(?:[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|\[?[0-9a-f:.]+\]?)$/;
const HELP =
  'give a recipient domain (example.org), an MX set or host as queue status shows it (mx1.example.net,mx2.example.net), or a URL origin (https://hooks.example.com)';

/** The name's shape, normalised; anything else is refused. Pure. */
export function parseDestinationName(text: string): ParsedName {
  const name = text.trim().toLowerCase();
  const refuse = () => badRequest(`"${text.slice(0, 100)}" is not a destination: ${HELP}`);
  if (name.length === 0 || name.length > 2048 || !isPrintable(name)) throw refuse();
  if (/^[a-z][a-z0-9+.-]*:\/\//.test(name)) {
    let url: URL;
    try {
      url = new URL(name);
    } catch {
      throw refuse();
    }
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') throw refuse();
    return { kind: 'origin', origin: url.origin };
  }
  const hosts = name.split(',').map((h) => h.trim());
  if (!hosts.every((h) => HOST.test(h))) throw refuse();
  const plain = hosts.map((h) => hostName(normalizeDomain(h)));
  if (!plain.every((h) => isIP(h) !== 0 || isValidDomain(h) || /^[a-z0-9_-]+$/.test(h))) throw refuse();
  if (plain.length === 1) return { kind: 'name', name: plain[0]! };
  return { kind: 'set', name: [...new Set(plain)].sort().join(',') };
}

/**
 * The engine destination a name stands for, in the order the router decides where mail goes:
 * the transport map, the smarthost, then the MX set. A name that is a destination already (an MX
 * set or a host from queue status) stands for itself. A name that matches nothing is refused,
 * with what it could have meant.
 */
export async function resolveDestination(text: string, facts: DestinationFacts): Promise<ResolvedDestination> {
  // One source's lane of a destination (queue/lane.ts): `<source>/<name>`.
  const lane = text.includes('://') ? null : splitLane(text.trim().toLowerCase());
  if (lane?.source) {
    if (!/^[a-z0-9][a-z0-9_-]{0,62}$/.test(lane.source)) throw badRequest(`"${lane.source.slice(0, 100)}" is not a source name (delivery.sources)`);
    const inner = await resolveDestination(lane.destination, facts);
    return { destination: laneOf(lane.source, inner.destination), via: inner.via };
  }
  const parsed = parseDestinationName(text);
  if (parsed.kind === 'origin') return { destination: parsed.origin, via: 'origin' };
  const { name } = parsed;
  if (parsed.kind === 'set') {
    if (facts.known(name)) return { destination: name, via: 'destination' };
    throw badRequest(`"${name}" matches nothing: no MX set of that name is queued, configured or suspended; ${HELP}`);
  }
  const transport = facts.transport[name];
  if (transport) return { destination: hostName(transport.host), via: 'transport' };
  if (Object.values(facts.transport).some((t) => hostName(t.host) === name)) return { destination: name, via: 'transport' };
  if (facts.smarthost) return { destination: hostName(facts.smarthost.host), via: 'smarthost' };
  if (facts.known(name)) return { destination: name, via: 'destination' };
  const found = isIP(name) === 0 && isValidDomain(name) ? await facts.mxSet(name) : { permanent: true, text: `${name} is not a domain name` };
  if (typeof found === 'string') return { destination: found, via: 'mx' };
  if (!found.permanent)
    throw new AppError(503, `cannot tell where mail for ${name} goes now (${found.text}): try again, or name its MX set as queue status shows it`);
  throw badRequest(
    `"${name}" matches nothing: no destination of that name is queued, configured or suspended, and as a recipient domain its mail has nowhere to go (${found.text}); ${HELP}`,
  );
}

/** A host as the engine names it (Router.mxSet): lower case, without IPv6 brackets. */
function hostName(host: string): string {
  return host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
}
