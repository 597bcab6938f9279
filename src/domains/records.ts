import type { DkimKeyRecord, DomainRecord } from '../store/records.ts';
import { dkimTxt } from './dkim-keys.ts';

/** What the server is, as far as the records its domains publish are concerned. */
export interface Identity {
  hostname: string;
  sendingIps: string[];
  dmarcRecord: string;
}

export type RecordCheck =
  { kind: 'spf' } | { kind: 'dkim'; key: DkimKeyRecord } | { kind: 'dmarc' } | { kind: 'cname'; target: string } | { kind: 'mx'; target: string };

/** A record a domain is asked to publish, and how to tell that it has been. */
export interface ExpectedRecord {
  /** Stable name of the record in the domain's DNS state ("spf", "dkim:<selector>", …). */
  key: string;
  type: 'TXT' | 'CNAME' | 'MX';
  host: string;
  content: string;
  required: boolean;
  label: string;
  check: RecordCheck;
}

export function spfRecord(identity: Identity): string {
  const mechanisms =
    identity.sendingIps.length > 0 ? identity.sendingIps.map((ip) => (ip.includes(':') ? `ip6:${ip}` : `ip4:${ip}`)) : [`a:${identity.hostname}`];
  return `v=spf1 ${mechanisms.join(' ')} ~all`;
}

/**
 * The records of a domain, derived from its state and the server's identity each time (so a
 * changed hostname shows at once). Required: SPF, DMARC and the active DKIM key(s); the rest
 * helps (standby and retired DKIM keys, return path, tracking, inbound MX).
 */
export function expectedRecords(domain: DomainRecord, identity: Identity): ExpectedRecord[] {
  const name = domain.name;
  const dkim = (key: DkimKeyRecord, required: boolean, label: string): ExpectedRecord => ({
    key: `dkim:${key.selector}`,
    type: 'TXT',
    host: `${key.selector}._domainkey.${name}`,
    content: dkimTxt(key),
    required,
    label,
    check: { kind: 'dkim', key },
  });
  const records: ExpectedRecord[] = [
    {
      key: 'spf',
      type: 'TXT',
      host: name,
      content: spfRecord(identity),
      required: true,
      label: 'SPF (merge into an existing SPF record)',
      check: { kind: 'spf' },
    },
    ...domain.dkim.active.keys.map((k) => dkim(k, true, `DKIM (active, ${k.algorithm})`)),
    ...(domain.dkim.standby?.keys ?? []).map((k) => dkim(k, false, `DKIM (standby for rotation, ${k.algorithm})`)),
    ...domain.dkim.retired.flatMap((slot) =>
      slot.keys.map((k) => dkim(k, false, `DKIM (retired, keep until ${slot.publishUntil ?? 'removed'}, ${k.algorithm})`)),
    ),
    { key: 'dmarc', type: 'TXT', host: `_dmarc.${name}`, content: identity.dmarcRecord, required: true, label: 'DMARC', check: { kind: 'dmarc' } },
    {
      key: 'return_path',
      type: 'CNAME',
      host: `${domain.returnPathSubdomain}.${name}`,
      content: identity.hostname,
      required: false,
      label: 'Return path (bounces come back here)',
      check: { kind: 'cname', target: identity.hostname },
    },
    {
      key: 'tracking',
      type: 'CNAME',
      host: `${domain.trackingSubdomain}.${name}`,
      content: identity.hostname,
      required: false,
      label: 'Open and click tracking',
      check: { kind: 'cname', target: identity.hostname },
    },
    {
      key: 'mx',
      type: 'MX',
      host: name,
      content: identity.hostname,
      required: false,
      label: 'MX, priority 10 (only to receive mail for inbound routes)',
      check: { kind: 'mx', target: identity.hostname },
    },
  ];
  return records;
}
