import { DnsUnavailableError } from '../../domains/resolver.ts';
import type { DnsWireClient } from '../../domains/dns-wire.ts';
import { Lru } from '../../util/lru.ts';
import type { Clock } from '../../util/time.ts';
import { parseTlsa, usableTlsa, type TlsaRecord } from './dane.ts';

/** What DANE makes of one MX host: no usable TLSA (as without DANE), its usable records, or a lookup that failed. */
export type TlsaLookup = { kind: 'none' } | { kind: 'records'; records: TlsaRecord[] } | { kind: 'unavailable'; detail: string };

/** Answers are kept for their TTL, within these bounds (seconds). */
const MIN_TTL = 60;
const MAX_TTL = 3600;
const KEPT = 10_000;

/**
 * The DNSSEC half of DANE (RFC 7672 §2.2): whether a domain's MX answer is validated (the AD
 * bit of the configured validating resolver), and the TLSA records at `_<port>._tcp.<mx host>`,
 * used only when validated too. Answers are cached in memory for their TTL.
 */
export class TlsaLookups {
  private readonly mx = new Lru<string, { until: number; secure: boolean }>(KEPT);
  private readonly tlsa = new Lru<string, { until: number; found: TlsaLookup }>(KEPT);

  constructor(
    private readonly wire: DnsWireClient,
    private readonly clock: Clock,
  ) {}

  /** Whether the domain's MX RRset (or its denial) is DNSSEC-validated; throws DnsUnavailableError when it cannot be asked. */
  async mxSecure(domain: string): Promise<boolean> {
    const now = this.clock.now();
    const cached = this.mx.get(domain);
    if (cached && cached.until > now) return cached.secure;
    const answer = await this.wire.query(domain, 'MX');
    this.mx.set(domain, { until: now + ttlMs(answer.records), secure: answer.ad });
    return answer.ad;
  }

  async forHost(host: string, port: number): Promise<TlsaLookup> {
    const name = `_${port}._tcp.${host.toLowerCase()}`;
    const now = this.clock.now();
    const cached = this.tlsa.get(name);
    if (cached && cached.until > now) return cached.found;
    let found: TlsaLookup;
    let ttl: number;
    try {
      const answer = await this.wire.query(name, 'TLSA');
      ttl = ttlMs(answer.records);
      const records = answer.ad ? answer.records.map((r) => parseTlsa(r.data)).filter((r): r is TlsaRecord => r !== null && usableTlsa(r)) : [];
      found = records.length > 0 ? { kind: 'records', records } : { kind: 'none' };
    } catch (err) {
      if (!(err instanceof DnsUnavailableError)) throw err;
      // RFC 7672 §2.2: a TLSA lookup of a host in a signed zone that fails is not an absence.
      found = { kind: 'unavailable', detail: err.detail };
      ttl = 5000;
    }
    this.tlsa.set(name, { until: now + ttl, found });
    return found;
  }
}

function ttlMs(records: ReadonlyArray<{ ttl: number }>): number {
  const ttl = records.length > 0 ? Math.min(...records.map((r) => r.ttl)) : MIN_TTL;
  return Math.min(MAX_TTL, Math.max(MIN_TTL, ttl)) * 1000;
}
