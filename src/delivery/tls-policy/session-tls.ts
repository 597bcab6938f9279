import { checkServerIdentity, type PeerCertificate, type TLSSocket } from 'node:tls';
import type { Hop } from '../router.ts';
import type { TlsFailureType } from '../tls-outcome.ts';
import { daneVerify } from './dane.ts';

/** What TLS one SMTP session had, checked against its hop's policy. */
export interface SessionTls {
  /** "TLSv1.3", or null in clear text. */
  version: string | null;
  /** The certificate verified: for DANE against the TLSA records, else WebPKI for the MX host name. */
  verified: boolean;
  /** Why it did not verify, or why the session fails its hop's policy, in RFC 8460 terms. */
  failure?: { type: TlsFailureType; detail: string } | undefined;
  remoteAddress: string | null;
  localAddress: string | null;
  /** Whether this send is the session's first (TLS reporting counts sessions, not messages). */
  fresh: boolean;
}

/** A session that does not satisfy its hop's enforced policy: closed before MAIL FROM. */
export class TlsPolicyError extends Error {
  override name = 'TlsPolicyError';
  constructor(readonly tls: SessionTls) {
    super(`TLS policy not met by ${tls.remoteAddress ?? 'the server'}: ${tls.failure?.detail ?? 'unverified'}`);
  }
}

/** Checks the session's TLS (socket: the TLS socket after STARTTLS, or null in clear text) against the hop's policy. */
export function checkSession(
  socket: TLSSocket | null,
  hop: Hop,
  plain: { remoteAddress?: string | undefined; localAddress?: string | undefined },
  now: number,
): SessionTls {
  const base = { remoteAddress: plain.remoteAddress ?? null, localAddress: plain.localAddress ?? null, fresh: true };
  if (!socket) return { ...base, version: null, verified: false, failure: { type: 'starttls-not-supported', detail: `${hop.name} did not offer STARTTLS` } };
  const version = socket.getProtocol();
  const verdict = verify(socket, hop, now);
  const policy = hop.policy;
  if (verdict.ok && policy?.kind === 'mta-sts' && !policy.listed) {
    return { ...base, version, verified: true, failure: { type: 'validation-failure', detail: `MX host ${hop.name} is not in the MTA-STS policy` } };
  }
  return verdict.ok ? { ...base, version, verified: true } : { ...base, version, verified: false, failure: { type: verdict.failure, detail: verdict.detail } };
}

function verify(socket: TLSSocket, hop: Hop, now: number): { ok: true } | { ok: false; failure: TlsFailureType; detail: string } {
  const chain = peerChain(socket.getPeerCertificate(true));
  if (hop.policy?.kind === 'dane') return daneVerify(chain, hop.policy.records, [hop.name], now);
  if (!socket.authorized) {
    const code = String(socket.authorizationError ?? 'UNABLE_TO_VERIFY');
    // Node checks the name against the SNI name itself: a chain that verifies for another name lands here.
    if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return { ok: false, failure: 'certificate-host-mismatch', detail: `certificate does not name ${hop.name}` };
    const type: TlsFailureType = /EXPIRED|NOT_YET_VALID/.test(code) ? 'certificate-expired' : 'certificate-not-trusted';
    return { ok: false, failure: type, detail: `certificate of ${hop.name}: ${code}` };
  }
  const cert = socket.getPeerCertificate();
  const mismatch = checkServerIdentity(hop.name, cert);
  if (mismatch) return { ok: false, failure: 'certificate-host-mismatch', detail: `certificate does not name ${hop.name}` };
  return { ok: true };
}

/** The presented certificates, leaf first (DER), up to the last distinct issuer. */
function peerChain(leaf: PeerCertificate & { issuerCertificate?: PeerCertificate }): Buffer[] {
  const out: Buffer[] = [];
  let cert: (PeerCertificate & { issuerCertificate?: PeerCertificate }) | undefined = leaf;
  while (cert?.raw && out.length < 10) {
    if (out.some((b) => b.equals(cert!.raw))) break;
    out.push(cert.raw);
    cert = cert.issuerCertificate;
  }
  return out;
}
