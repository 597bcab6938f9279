import type { Hop } from '../router.ts';
import type { TlsFailureType, TlsSessionResult } from '../tls-outcome.ts';
import { tlsaText, type TlsaRecord } from './dane.ts';
import type { MtaSts, StsLookup } from './mta-sts.ts';
import { mxMatches } from './mta-sts-policy.ts';
import type { TlsaLookups } from './tlsa-lookup.ts';

/** What TLS reporting says of the policy that applied (RFC 8460 §4.4 policy fields). */
export type PolicyReport = Pick<TlsSessionResult, 'policyDomain' | 'policyType' | 'policyStrings' | 'mxHosts'>;

/**
 * The policy a hop must be delivered under. MTA-STS `enforce` and DANE are enforced: TLS, and a
 * certificate that verifies (WebPKI for the MX name; TLSA match), or no delivery to that hop.
 * MTA-STS `testing` delivers as without and reports; `listed` says whether the MX host matched.
 */
export type HopPolicy =
  { kind: 'mta-sts'; mode: 'enforce' | 'testing'; listed: boolean; report: PolicyReport } | { kind: 'dane'; records: TlsaRecord[]; report: PolicyReport };

/** Whether the hop may only be used over verified TLS. */
export function enforced(policy: HopPolicy | undefined): boolean {
  return policy !== undefined && (policy.kind === 'dane' || policy.mode === 'enforce');
}

/** A hop the policy leaves out, and why (reported, and named in the deferral). */
export interface RefusedHop {
  hop: Hop;
  failure: TlsFailureType;
  detail: string;
  report: PolicyReport;
}

export interface TlsPlan {
  /** The hops to try, in order, each with the policy it is under (none: opportunistic as configured). */
  hops: Hop[];
  refused: RefusedHop[];
  /** A policy the domain announces that could not be had: its sessions are reported as failed. */
  unavailable: { failure: TlsFailureType; detail: string } | null;
}

/**
 * Applies the receiving domain's TLS policies to its MX hops: DANE (RFC 7672) first, for hosts
 * with usable TLSA records in a validated zone; then MTA-STS (RFC 8461). Relaying hops
 * (transport, smarthost) are left as they are: the policies are about MX hosts.
 */
export class TlsPolicies {
  constructor(
    private readonly sts: MtaSts | null,
    private readonly dane: TlsaLookups | null,
  ) {}

  /** Whether any policy can apply: false leaves delivery as it was, without a lookup. */
  get active(): boolean {
    return this.sts !== null || this.dane !== null;
  }

  async plan(domain: string, hops: Hop[]): Promise<TlsPlan> {
    if (hops.length === 0 || hops.some((h) => h.relay)) return { hops, refused: [], unavailable: null };
    const [sts, secure] = await Promise.all([
      this.sts ? this.sts.lookup(domain) : Promise.resolve<StsLookup>({ kind: 'none' }),
      this.dane ? this.dane.mxSecure(domain) : Promise.resolve(false),
    ]);
    const stsReport: PolicyReport | null =
      sts.kind === 'policy' ? { policyDomain: domain, policyType: 'sts', policyStrings: sts.active.policy.lines, mxHosts: sts.active.policy.mx } : null;
    const planned: Hop[] = [];
    const refused: RefusedHop[] = [];
    for (const hop of hops) {
      if (secure && this.dane) {
        const tlsa = await this.dane.forHost(hop.name, hop.port);
        const report: PolicyReport = { policyDomain: domain, policyType: 'tlsa', policyStrings: tlsa.kind === 'records' ? tlsa.records.map(tlsaText) : [] };
        if (tlsa.kind === 'records') {
          planned.push({ ...hop, policy: { kind: 'dane', records: tlsa.records, report } });
          continue;
        }
        if (tlsa.kind === 'unavailable') {
          refused.push({ hop, failure: 'dnssec-invalid', detail: `TLSA lookup for ${hop.name} failed: ${tlsa.detail}`, report });
          continue;
        }
      }
      if (sts.kind === 'policy' && stsReport) {
        const { mode, mx } = sts.active.policy;
        const listed = mxMatches(mx, hop.name);
        if (mode === 'enforce' && !listed) {
          refused.push({
            hop,
            failure: 'validation-failure',
            detail: `MX host ${hop.name} is not in the MTA-STS policy of ${domain} (mx: ${mx.join(', ')})`,
            report: stsReport,
          });
          continue;
        }
        planned.push({ ...hop, policy: { kind: 'mta-sts', mode: mode === 'enforce' ? 'enforce' : 'testing', listed, report: stsReport } });
        continue;
      }
      planned.push(hop);
    }
    return { hops: planned, refused, unavailable: sts.kind === 'unavailable' ? { failure: sts.failure, detail: sts.detail } : null };
  }
}
