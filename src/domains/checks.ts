import { cidrContains, parseCidr, parseClientIp } from '../util/cidr.ts';
import type { DkimKeyRecord } from '../store/records.ts';
import type { ExpectedRecord, Identity } from './records.ts';
import { DnsUnavailableError, stripDot, type DnsResolver } from './resolver.ts';

/** Whether each record is published: true, false, or null when DNS could not be asked. */
export type CheckResult = Map<string, boolean | null>;

/**
 * Looks every record up (in parallel) and judges it. When not one lookup was answered, the
 * first failure is thrown (a DnsUnavailableError naming the question, the resolver and the code).
 */
export async function checkRecords(resolver: DnsResolver, records: ExpectedRecord[], identity: Identity): Promise<CheckResult> {
  let failure = null as DnsUnavailableError | null;
  const results = await Promise.all(
    records.map(async (record): Promise<[string, boolean | null]> => {
      try {
        return [record.key, await isPublished(resolver, record, identity)];
      } catch (err) {
        if (!(err instanceof DnsUnavailableError)) throw err;
        failure ??= err;
        return [record.key, null];
      }
    }),
  );
  if (failure && results.every(([, found]) => found === null)) throw failure;
  return new Map(results);
}

async function isPublished(resolver: DnsResolver, record: ExpectedRecord, identity: Identity): Promise<boolean> {
  const { check } = record;
  switch (check.kind) {
    case 'spf':
      return spfAuthorizes(await resolver.txt(record.host), identity);
    case 'dkim':
      return dkimMatches(await resolver.txt(record.host), check.key);
    case 'dmarc':
      return dmarcPresent(await resolver.txt(record.host));
    case 'cname':
      return (await resolver.cname(record.host)).includes(stripDot(check.target));
    case 'mx':
      return (await resolver.mx(record.host)).some((mx) => mx.exchange === stripDot(check.target));
  }
}

/**
 * Whether the domain's one SPF record lets this server send, evaluated as a receiver would, left
 * to right: for each sending address the first mechanism that matches it decides, and only a
 * pass (`+`, or no qualifier) counts. `a:<hostname>` matches our own addresses; `all` matches
 * everything; mechanisms that would need further lookups (include, mx, exists, a without our
 * hostname) are not followed. With no sending addresses configured, `a:<hostname>` is the test.
 */
export function spfAuthorizes(txt: string[], identity: Identity): boolean {
  const spf = txt.filter((t) => /^v=spf1(\s|$)/i.test(t.trim()));
  if (spf.length !== 1) return false; // none, or several (a permanent error under RFC 7208)
  const terms = spf[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map((t) => t.toLowerCase())
    .filter((t) => !t.includes('='));
  const ourHost = `a:${stripDot(identity.hostname)}`;
  const verdict = (matches: (mechanism: string) => boolean): boolean => {
    for (const term of terms) {
      const qualifier = /^[-+~?]/.test(term) ? term[0] : '+';
      const mechanism = term.replace(/^[-+~?]/, '');
      if (mechanism === 'all' || matches(mechanism)) return qualifier === '+';
    }
    return false; // no match: neutral, not a pass
  };
  if (identity.sendingIps.length === 0) return verdict((m) => m === ourHost);
  return identity.sendingIps.every((ip) => {
    const addr = parseClientIp(ip);
    if (!addr) return false;
    return verdict((m) => {
      if (m === ourHost) return true;
      if (!m.startsWith('ip4:') && !m.startsWith('ip6:')) return false;
      try {
        return cidrContains(parseCidr(m.slice(4)), addr);
      } catch {
        return false;
      }
    });
  });
}

/** Whether a TXT record at the selector publishes exactly this key. */
export function dkimMatches(txt: string[], key: DkimKeyRecord): boolean {
  return txt.some((record) => {
    const tags = parseTags(record);
    // RFC 6376 §3.6.1: v=, when present, must be first; h= must allow sha256.
    if (tags.v !== undefined && (tags.v !== 'DKIM1' || !/^\s*v\s*=/.test(record))) return false;
    if (
      tags.h !== undefined &&
      !tags.h
        .split(':')
        .map((h) => h.trim())
        .includes('sha256')
    )
      return false;
    if ((tags.k ?? 'rsa') !== key.algorithm) return false;
    return (tags.p ?? '').replace(/\s+/g, '') === key.publicKey;
  });
}

export function dmarcPresent(txt: string[]): boolean {
  return txt.filter((t) => /^v=DMARC1\s*(;|$)/.test(t.trim())).length === 1;
}

/** `tag=value; tag=value` as in DKIM and DMARC records. */
export function parseTags(record: string): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const part of record.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    tags[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return tags;
}
