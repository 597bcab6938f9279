/**
 * What TLS one delivery had, and under which policy: kept on its delivery event, shown in the
 * queue view, counted in the metrics, and aggregated for TLS reporting (RFC 8460).
 */

/** The policy that governed the session: none (TLS off), opportunistic, MTA-STS (RFC 8461) or DANE (RFC 7672). */
export type TlsPolicyName = 'none' | 'opportunistic' | 'mta-sts' | 'dane';

export interface TlsOutcome {
  policy: TlsPolicyName;
  /** The MTA-STS mode that applied ('enforce' or 'testing'); absent for the other policies. */
  mode?: 'enforce' | 'testing' | undefined;
  /** The protocol version negotiated ("TLSv1.3"), or null when the session was in clear text. */
  version: string | null;
  /** Whether the server's certificate was verified (WebPKI name for MTA-STS, TLSA match for DANE). */
  verified: boolean;
}

/** RFC 8460 §4.3 result types of a failed session. */
export type TlsFailureType =
  | 'starttls-not-supported'
  | 'certificate-host-mismatch'
  | 'certificate-expired'
  | 'certificate-not-trusted'
  | 'validation-failure'
  | 'tlsa-invalid'
  | 'dnssec-invalid'
  | 'dane-required'
  | 'sts-policy-fetch-error'
  | 'sts-policy-invalid'
  | 'sts-webpki-invalid';

/** One session (or attempt to have one) with a receiving MX host, as TLS reporting counts it. */
export interface TlsSessionResult {
  /** The recipient domain whose policy applied (RFC 8460 `policy-domain`). */
  policyDomain: string;
  /** RFC 8460 `policy-type`. */
  policyType: 'sts' | 'tlsa' | 'no-policy-found';
  /** RFC 8460 `policy-string`: the MTA-STS policy's lines, or the TLSA records as presentation text. */
  policyStrings: string[];
  /** RFC 8460 `mx-host`: the MTA-STS `mx` pattern lines, when the policy is MTA-STS. */
  mxHosts?: string[] | undefined;
  /** The MX host name the session was with. */
  receivingMxHostname: string;
  receivingIp: string | null;
  /** The local address the session came from, when bound (delivery sources). */
  sendingMtaIp: string | null;
  success: boolean;
  failure?: { type: TlsFailureType; detail?: string | undefined } | undefined;
}

/** Where delivery reports each session's TLS result (the TLS reporting aggregator). */
export interface TlsReportSink {
  record(result: TlsSessionResult): void;
}
