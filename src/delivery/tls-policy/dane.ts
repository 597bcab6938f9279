import { createHash, createPublicKey, X509Certificate } from 'node:crypto';
import type { TlsFailureType } from '../tls-outcome.ts';

/** One TLSA record (RFC 6698 §2.1). */
export interface TlsaRecord {
  usage: number;
  selector: number;
  matching: number;
  data: Buffer;
}

/** Usages honoured for SMTP (RFC 7672 §3.1): DANE-TA(2) and DANE-EE(3); PKIX usages 0 and 1 are not. */
export function usableTlsa(r: TlsaRecord): boolean {
  return (r.usage === 2 || r.usage === 3) && (r.selector === 0 || r.selector === 1) && r.matching >= 0 && r.matching <= 2;
}

/** The RDATA of a TLSA record; null when too short to be one. */
export function parseTlsa(data: Buffer): TlsaRecord | null {
  if (data.length < 4) return null;
  return { usage: data[0]!, selector: data[1]!, matching: data[2]!, data: Buffer.from(data.subarray(3)) };
}

/** Presentation form ("3 1 1 ab12…"), for logs and TLS reporting's policy-string. */
export function tlsaText(r: TlsaRecord): string {
  return `${r.usage} ${r.selector} ${r.matching} ${r.data.toString('hex')}`;
}

export type DaneVerdict = { ok: true } | { ok: false; failure: TlsFailureType; detail: string };

/**
 * Whether the certificates a server presented (leaf first, DER) satisfy its TLSA records
 * (RFC 7672 §3.1, RFC 6698 §2.1): a DANE-EE(3) record matches the leaf, whose names and dates are
 * not checked; a DANE-TA(2) record matches a certificate of the chain (or, as a full public key,
 * the key that signed one), the chain from the leaf up to it is signed link by link, and the leaf
 * is valid now and names one of `names` (the MX host).
 */
export function daneVerify(chainDer: readonly Buffer[], records: readonly TlsaRecord[], names: readonly string[], now: number): DaneVerdict {
  if (chainDer.length === 0) return { ok: false, failure: 'validation-failure', detail: 'the server presented no certificate' };
  let chain: X509Certificate[];
  try {
    chain = chainDer.map((der) => new X509Certificate(der));
  } catch (err) {
    return { ok: false, failure: 'validation-failure', detail: `unreadable certificate: ${(err as Error).message}` };
  }
  const usable = records.filter(usableTlsa);
  if (usable.some((r) => r.usage === 3 && matches(r, chain[0]!))) return { ok: true };
  let taDetail = '';
  for (const r of usable.filter((x) => x.usage === 2)) {
    const anchor = anchorDepth(r, chain);
    if (anchor === null) continue;
    if (!signedUpTo(chain, anchor.depth, anchor.key)) {
      taDetail = 'the chain does not lead to the DANE-TA trust anchor';
      continue;
    }
    const leaf = chain[0]!;
    if (Date.parse(leaf.validTo) < now || Date.parse(leaf.validFrom) > now)
      return { ok: false, failure: 'certificate-expired', detail: `the certificate is valid ${leaf.validFrom} to ${leaf.validTo}` };
    if (!names.some((n) => leaf.checkHost(n) !== undefined))
      return { ok: false, failure: 'certificate-host-mismatch', detail: `the certificate does not name ${names.join(' or ')}` };
    return { ok: true };
  }
  return { ok: false, failure: 'validation-failure', detail: taDetail || 'no TLSA record matches the certificate chain' };
}

function matches(r: TlsaRecord, cert: X509Certificate): boolean {
  return digest(r.matching, selected(r.selector, cert)).equals(r.data);
}

function selected(selector: number, cert: X509Certificate): Buffer {
  return selector === 0 ? cert.raw : cert.publicKey.export({ type: 'spki', format: 'der' });
}

function digest(matching: number, bytes: Buffer): Buffer {
  if (matching === 1) return createHash('sha256').update(bytes).digest();
  if (matching === 2) return createHash('sha512').update(bytes).digest();
  return bytes;
}

/**
 * Where a DANE-TA record anchors the chain: the depth of the certificate it matches, or for a
 * full public key (selector 1, matching 0) not in the chain, the depth of the certificate it signed.
 */
function anchorDepth(r: TlsaRecord, chain: X509Certificate[]): { depth: number; key: ReturnType<typeof createPublicKey> | null } | null {
  for (let depth = 0; depth < chain.length; depth++) if (matches(r, chain[depth]!)) return { depth, key: null };
  if (r.selector !== 1 || r.matching !== 0) return null;
  let key;
  try {
    key = createPublicKey({ key: r.data, format: 'der', type: 'spki' });
  } catch {
    return null;
  }
  for (let depth = 0; depth < chain.length; depth++) if (chain[depth]!.verify(key)) return { depth, key };
  return null;
}

/** Each certificate below `depth` is issued and signed by the next; with `key`, the one at depth is signed by it. */
function signedUpTo(chain: X509Certificate[], depth: number, key: ReturnType<typeof createPublicKey> | null): boolean {
  for (let i = 0; i < depth; i++) {
    const cert = chain[i]!;
    const issuer = chain[i + 1]!;
    if (!cert.checkIssued(issuer) || !cert.verify(issuer.publicKey)) return false;
  }
  return key === null || chain[depth]!.verify(key);
}
