import { dkimMatches, dmarcPresent, spfAuthorizes } from '../domains/checks.ts';
import { expectedRecords, type ExpectedRecord, type Identity } from '../domains/records.ts';
import { stripDot } from '../domains/resolver.ts';
import type { DomainRecord } from '../store/records.ts';
import { fail, ok, warn, type Check } from './check.ts';
import type { Answer, Lookups } from './lookups.ts';

const SPF = /^v=spf1(\s|$)/i;
const DMARC = /^v=DMARC1\s*(;|$)/;

/** Whether a record is the active DKIM key: those are checked with the key on disk (dkim.ts). */
export function isActiveDkim(domain: DomainRecord, record: ExpectedRecord): boolean {
  return record.check.kind === 'dkim' && domain.dkim.active.keys.some((k) => record.key === `dkim:${k.selector}`);
}

/** Asks DNS the question that tells whether `record` is published. */
export function lookUp(lookups: Lookups, record: ExpectedRecord): Promise<Answer> {
  switch (record.type) {
    case 'TXT':
      return lookups.txt(record.host);
    case 'CNAME':
      return lookups.cname(record.host);
    case 'MX':
      return lookups.mx(record.host);
  }
}

const quoted = (values: string[]) => values.map((v) => `"${v}"`).join(', ');

/**
 * Why `record` is not published as asked, judged as src/domains/checks.ts judges it, or null
 * when it is. `values` are the TXT strings, CNAME targets or MX exchanges found at its host.
 */
export function recordProblem(record: ExpectedRecord, values: string[], identity: Identity): string | null {
  const { check, host, content } = record;
  switch (check.kind) {
    case 'spf': {
      const spf = values.filter((t) => SPF.test(t.trim()));
      if (spf.length === 0) return `no SPF record at ${host}: publish TXT "${content}"`;
      if (spf.length > 1) return `${spf.length} SPF records at ${host} (${quoted(spf)}): receivers treat several as a permanent error; merge them`;
      if (!spfAuthorizes(values, identity)) {
        // Each address on its own: a delivery source added later is the one missing, as a rule.
        const missing = identity.sendingIps.filter((ip) => !spfAuthorizes(values, { ...identity, sendingIps: [ip] }));
        const us = identity.sendingIps.length > 0 ? missing.join(', ') : `a:${identity.hostname}`;
        return `the SPF record "${spf[0]}" does not authorise this server (${us}): publish "${content}" or merge it in`;
      }
      return null;
    }
    case 'dmarc': {
      const dmarc = values.filter((t) => DMARC.test(t.trim()));
      if (dmarc.length === 0) return `no DMARC record at ${host}: publish TXT "${content}"`;
      if (!dmarcPresent(values)) return `${dmarc.length} DMARC records at ${host} (${quoted(dmarc)}): receivers ignore them all; keep one`;
      return null;
    }
    case 'dkim':
      if (values.length === 0) return `no TXT record at ${host}: publish "${content}"`;
      if (!dkimMatches(values, check.key)) return `TXT ${host} does not publish this key (found ${quoted(values.map(shortKey))}): publish "${content}"`;
      return null;
    case 'cname':
      if (values.length === 0) return `no CNAME at ${host}: publish CNAME ${host} → ${check.target}`;
      if (!values.includes(stripDot(check.target))) return `CNAME ${host} → ${values.join(', ')}, not ${check.target}`;
      return null;
    case 'mx':
      if (values.length === 0) return `no MX record at ${host}: publish MX 10 ${check.target}`;
      if (!values.includes(stripDot(check.target))) return `MX of ${host} is ${values.join(', ')}, not ${check.target}`;
      return null;
  }
}

/** A DKIM TXT value with its long p= shortened to its tail, enough to tell keys apart. */
export function shortKey(txt: string): string {
  return txt.replace(/(p=\s*)([A-Za-z0-9+/=\s]{24,})/, (_all, p: string, key: string) => `${p}…${key.replace(/\s+/g, '').slice(-16)}`);
}

/**
 * The verdict on one record: OK when published as asked; otherwise FAIL for a required record,
 * WARN for an optional one; a lookup that failed likewise, with its code. Each names the resolver.
 */
export function judgeRecord(domain: DomainRecord, record: ExpectedRecord, answer: Answer, identity: Identity, via: string): Check {
  const name = `dns ${domain.name} ${record.key}`;
  const bad = record.required ? fail : warn;
  const what = record.required ? record.label : `${record.label}, optional`;
  const asked = `(asked ${via})`;
  if ('error' in answer) return bad(name, `${record.type} ${record.host}: ${answer.error} ${asked}`);
  const problem = recordProblem(record, answer.values, identity);
  if (problem !== null) return bad(name, `${what}: ${problem} ${asked}`);
  return ok(name, `${what}: ${record.type} ${record.host} published ${asked}`);
}

/** Every record the domain is asked to publish, but its active DKIM keys, looked up now. */
export async function checkDomainRecords(domain: DomainRecord, identity: Identity, lookups: Lookups): Promise<Check[]> {
  const records = expectedRecords(domain, identity).filter((r) => !isActiveDkim(domain, r));
  return Promise.all(records.map(async (r) => judgeRecord(domain, r, await lookUp(lookups, r), identity, lookups.via)));
}
