/**
 * The TLSRPT record (RFC 8460 §3): TXT at `_smtp._tls.<domain>`, "v=TLSRPTv1; rua=<uri>,<uri>".
 * Only `mailto:` and `https:` URIs are reporting targets; others are skipped.
 */

/** Targets taken from one record at most: a record may not make us send without end. */
export const MAX_TARGETS = 5;
const MAX_URI = 2048;

export type ReportTarget = { kind: 'mailto'; address: string } | { kind: 'https'; url: string };

export type TlsRptRecord = { targets: ReportTarget[] } | { problem: string };

/** Reads the TXT strings found at `_smtp._tls.<domain>`; null when no TLSRPT record is there. */
export function parseTlsRpt(txt: readonly string[]): TlsRptRecord | null {
  const records = txt.filter((t) => /^v=TLSRPTv1\s*(;|$)/.test(t.trim()));
  if (records.length === 0) return null;
  // §3: several records mean none applies.
  if (records.length > 1) return { problem: `${records.length} TLSRPT records: reports go to none` };
  const fields = new Map<string, string>();
  for (const part of records[0]!.split(';').slice(1)) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    fields.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).trim());
  }
  const rua = fields.get('rua');
  if (!rua) return { problem: 'the TLSRPT record has no rua' };
  const targets: ReportTarget[] = [];
  for (const raw of rua.split(',')) {
    const target = parseTarget(raw.trim());
    if (target && targets.length < MAX_TARGETS) targets.push(target);
  }
  if (targets.length === 0) return { problem: `no mailto: or https: address in rua=${rua.slice(0, 200)}` };
  return { targets };
}

function parseTarget(uri: string): ReportTarget | null {
  if (uri.length === 0 || uri.length > MAX_URI) return null;
  if (/^mailto:/i.test(uri)) {
    let address: string;
    try {
      address = decodeURIComponent(uri.slice('mailto:'.length).split('?')[0]!);
    } catch {
      return null;
    }
    return /^[^@\s<>",;]+@[A-Za-z0-9.-]+$/.test(address) ? { kind: 'mailto', address } : null;
  }
  if (/^https:/i.test(uri)) {
    try {
      const url = new URL(uri);
      if (url.username !== '' || url.password !== '') return null;
      return { kind: 'https', url: url.href };
    } catch {
      return null;
    }
  }
  return null;
}
