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
  return (await lookUp(resolver, record, identity)).published;
}

/** What DNS holds at a record's name (the values that concern it), and whether that publishes it. */
async function lookUp(resolver: DnsResolver, record: ExpectedRecord, identity: Identity): Promise<{ published: boolean; found: string[] }> {
  const { check } = record;
  switch (check.kind) {
    case 'spf': {
      const txt = await resolver.txt(record.host);
      return { published: spfAuthorizes(txt, identity), found: spfRecords(txt) };
    }
    case 'dkim': {
      const txt = await resolver.txt(record.host);
      return { published: dkimMatches(txt, check.key), found: txt };
    }
    case 'dmarc': {
      const txt = await resolver.txt(record.host);
      return { published: dmarcPresent(txt), found: dmarcRecords(txt) };
    }
    case 'cname': {
      const targets = await resolver.cname(record.host);
      return { published: targets.includes(stripDot(check.target)), found: targets };
    }
    case 'mx': {
      const exchanges = (await resolver.mx(record.host)).map((mx) => mx.exchange);
      return { published: exchanges.includes(stripDot(check.target)), found: exchanges };
    }
  }
}

/** At most this many values found are told per record, each cut at this length. */
export const MAX_FOUND = 10;
export const MAX_FOUND_CHARS = 512;

/**
 * A record as DNS holds it now: propagated; missing (nothing that concerns it at its name: no
 * SPF, DMARC or DKIM TXT, no CNAME, no MX); wrong (something there that does not publish it);
 * unknown when the lookup was not answered.
 */
export type RecordInspection = { status: 'propagated' | 'missing' | 'wrong'; found: string[] } | { status: 'unknown' };

/** Looks every record up (in parallel), judged as checkRecords judges, with what was found. */
export async function inspectRecords(resolver: DnsResolver, records: ExpectedRecord[], identity: Identity): Promise<Map<string, RecordInspection>> {
  const results = await Promise.all(
    records.map(async (record): Promise<[string, RecordInspection]> => {
      try {
        const { published, found } = await lookUp(resolver, record, identity);
        const status = published ? 'propagated' : found.length === 0 ? 'missing' : 'wrong';
        return [record.key, { status, found: found.slice(0, MAX_FOUND).map((v) => v.slice(0, MAX_FOUND_CHARS)) }];
      } catch (err) {
        if (!(err instanceof DnsUnavailableError)) throw err;
        return [record.key, { status: 'unknown' }];
      }
    }),
  );
  return new Map(results);
}

/**
 * Whether the domain's one SPF record lets this server send, evaluated as a receiver would, left
 * to right: for each sending address the first mechanism that matches it decides, and only a
 * pass (`+`, or no qualifier) counts. `a:<hostname>` matches our own addresses; `all` matches
 * everything; mechanisms that would need further lookups (include, mx, exists, a without our
 * hostname) are not followed. With no sending addresses configured, `a:<hostname>` is the test.
 */
export function spfAuthorizes(txt: string[], identity: Identity): boolean {
  const spf = spfRecords(txt);
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

/** The SPF records among a name's TXT strings. */
export function spfRecords(txt: string[]): string[] {
  return txt.filter((t) => /^v=spf1(\s|$)/i.test(t.trim()));
}

/** The DMARC records among a name's TXT strings. */
export function dmarcRecords(txt: string[]): string[] {
  return txt.filter((t) => /^v=DMARC1\s*(;|$)/.test(t.trim()));
}

export function dmarcPresent(txt: string[]): boolean {
  return dmarcRecords(txt).length === 1;
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
