/**
 * MTA-STS (RFC 8461) as data: the `_mta-sts` TXT record, the policy file and the match of an MX
 * host against its `mx` patterns. Pure functions.
 */

export type MtaStsMode = 'enforce' | 'testing' | 'none';

export interface MtaStsPolicy {
  mode: MtaStsMode;
  /** The `mx` patterns, lower-case ("mail.example.com", "*.example.net"). */
  mx: string[];
  /** Seconds the policy may be cached (RFC 8461 §3.2: at most 31557600). */
  maxAge: number;
  /** The policy's lines as served (TLS reporting's `policy-string`). */
  lines: string[];
}

/** RFC 8461 §3.2: max_age is at most a year. */
export const MAX_AGE_LIMIT = 31_557_600;

/**
 * The `id` of the domain's `v=STSv1` TXT record; null when there is none, or more than one
 * (RFC 8461 §3.1: then the sender acts as if there were none).
 */
export function stsRecordId(records: readonly string[]): string | null {
  const sts = records.filter((r) => /^v=STSv1\s*(;|$)/.test(r.trim()));
  if (sts.length !== 1) return null;
  const id = /(?:^|;)\s*id=([A-Za-z0-9]{1,32})\s*(?:;|$)/.exec(sts[0]!)?.[1];
  return id ?? null;
}

/** Parses a policy file (RFC 8461 §3.2); throws an Error saying what is wrong. */
export function parsePolicy(text: string): MtaStsPolicy {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  const fields = new Map<string, string[]>();
  for (const line of lines) {
    const at = line.indexOf(':');
    if (at <= 0) throw new Error(`not a "key: value" line: ${JSON.stringify(line.slice(0, 80))}`);
    const k = line.slice(0, at).trim().toLowerCase();
    fields.set(k, [...(fields.get(k) ?? []), line.slice(at + 1).trim()]);
  }
  if (fields.get('version')?.[0] !== 'STSv1') throw new Error('version is not STSv1');
  const mode = fields.get('mode')?.[0];
  if (mode !== 'enforce' && mode !== 'testing' && mode !== 'none') throw new Error(`mode ${JSON.stringify(mode ?? '')} is not enforce, testing or none`);
  const age = fields.get('max_age')?.[0] ?? '';
  if (!/^\d{1,10}$/.test(age)) throw new Error('max_age is not a number of seconds');
  const mx = (fields.get('mx') ?? []).map((m) => m.toLowerCase().replace(/\.$/, ''));
  if (mode !== 'none' && mx.length === 0) throw new Error('no mx pattern');
  for (const pattern of mx) {
    if (!/^(\*\.)?[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(pattern)) throw new Error(`mx ${JSON.stringify(pattern)} is not a host name or *.domain pattern`);
  }
  return { mode, mx, maxAge: Math.min(Number(age), MAX_AGE_LIMIT), lines };
}

/** Whether an MX host matches one of the patterns: exactly, or a `*.` pattern by one leftmost label (RFC 8461 §4.1). */
export function mxMatches(patterns: readonly string[], host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return patterns.some((p) => {
    if (!p.startsWith('*.')) return p === name;
    const rest = p.slice(1);
    return name.endsWith(rest) && !name.slice(0, -rest.length).includes('.') && name.length > rest.length;
  });
}
