import { Resolver } from 'node:dns/promises';

/**
 * A lookup that could not be answered (timeout, SERVFAIL, refused): not the same as "no record".
 * Its message names the error code only (it may reach a tenant, e.g. as a delivery's reply text);
 * `detail` adds the question and the resolver asked, for the operator (log lines, the CLI, doctor).
 */
export class DnsUnavailableError extends Error {
  override name = 'DnsUnavailableError';
  constructor(
    readonly code: string,
    readonly question = '',
    readonly resolver = '',
  ) {
    super(`DNS lookup failed: ${code}`);
  }

  get detail(): string {
    const asked = [this.question, this.resolver && `asked ${this.resolver}`].filter(Boolean).join(', ');
    return asked ? `${this.message} (${asked})` : this.message;
  }
}

/** How a resolver with these servers is named to the operator. */
export function resolverName(servers: string[]): string {
  if (servers.length > 0) return `dns.servers ${servers.join(', ')}`;
  return `the system's resolvers ${new Resolver().getServers().join(', ') || '(none found)'}`;
}

/** Codes that mean the name or the record type is not there: an empty answer, not a failure. */
const ABSENT = new Set(['ENOTFOUND', 'ENODATA', 'NXDOMAIN', 'ENONAME']);

export interface MxRecord {
  exchange: string;
  priority: number;
}

/** The DNS questions Postilion asks, with absence reported as an empty answer. */
export interface DnsResolver {
  txt(name: string): Promise<string[]>;
  cname(name: string): Promise<string[]>;
  mx(name: string): Promise<MxRecord[]>;
  /** IPv4 and IPv6 addresses of a host (A, then AAAA). */
  addresses(name: string): Promise<string[]>;
  /** A generic lookup in the shape mailauth expects (`dns.promises.resolve`). */
  resolve(name: string, rrtype: string): Promise<unknown>;
}

export interface ResolverOptions {
  servers: string[];
  timeoutMs: number;
  tries: number;
}

/** Node's resolver (c-ares) pointed at the configured servers, so tests and air-gapped sites choose. */
export function createResolver(options: ResolverOptions): DnsResolver {
  const resolver = new Resolver({ timeout: options.timeoutMs, tries: options.tries });
  if (options.servers.length > 0) resolver.setServers(options.servers);
  const asked = resolverName(options.servers);
  const ask = async <T>(question: string, lookup: () => Promise<T[]>): Promise<T[]> => {
    try {
      return await lookup();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (ABSENT.has(code)) return [];
      throw new DnsUnavailableError(code || (err as Error).message, question, asked);
    }
  };
  return {
    // A TXT record is a list of strings to be joined (RFC 7208 §3.3).
    txt: async (name) => (await ask(`TXT ${name}`, () => resolver.resolveTxt(name))).map((chunks) => chunks.join('')),
    cname: async (name) => (await ask(`CNAME ${name}`, () => resolver.resolveCname(name))).map(stripDot),
    mx: async (name) => (await ask(`MX ${name}`, () => resolver.resolveMx(name))).map((r) => ({ exchange: stripDot(r.exchange), priority: r.priority })),
    addresses: async (name) => {
      const [v4, v6] = await Promise.allSettled([ask(`A ${name}`, () => resolver.resolve4(name)), ask(`AAAA ${name}`, () => resolver.resolve6(name))]);
      const found = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
      // An answer for one family is enough; both failing is a DNS failure, not an absence.
      if (found.length === 0 && v4.status === 'rejected') throw v4.reason;
      return found;
    },
    resolve: (name, rrtype) => resolver.resolve(name, rrtype as 'TXT'),
  };
}

export function stripDot(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}
