import type { DomainRecord } from '../store/records.ts';
import { isUtf8MailboxAddress } from '../util/email.ts';
import type { VerpTokens } from '../util/verp.ts';

/** The local part, at `<return path subdomain>.<domain>`, that takes feedback-loop (ARF) reports. */
export const COMPLAINT_LOCAL_PART = 'complaints';

/** A route as the inbound side matches it. */
export interface InboundRoute {
  id: string;
  accountId: string;
  /** `local@domain`, the local part exact or with one `*` (`*`, `ticket-*`, `*-support`). */
  recipient: string;
  enabled: boolean;
}

export interface PolicyDeps {
  domainByName(name: string): Promise<DomainRecord | undefined>;
  /** The account's routes whose recipient pattern is at `domain`. */
  routesAt(accountId: string, domain: string): Promise<InboundRoute[]>;
  verp: VerpTokens;
}

/** Why a recipient is accepted, with what its mail is for. */
export type Accepted =
  | { kind: 'route'; address: string; accountId: string; domain: string; routeIds: string[] }
  | { kind: 'bounce'; address: string; messageId: string }
  | { kind: 'complaint'; address: string; accountId: string; domain: string };

export type Decision = Accepted | { kind: 'refused'; reason: string };

/**
 * Which recipients the inbound MX accepts, and nothing else: an address an enabled route of the
 * account owning its domain matches; a VERP return path of a message Postilion sent, with a
 * valid token; the complaint address of a domain. Postilion never relays.
 */
export class InboundPolicy {
  constructor(private readonly d: PolicyDeps) {}

  async decide(recipient: string): Promise<Decision> {
    // A UTF-8 local part arrives only under SMTPUTF8 (smtp/listener-server.ts); domains are A-labels.
    if (!isUtf8MailboxAddress(recipient)) return { kind: 'refused', reason: 'not a valid address' };
    const at = recipient.lastIndexOf('@');
    const local = recipient.slice(0, at);
    const host = recipient.slice(at + 1).toLowerCase();
    const address = `${local}@${host}`;

    // <rp>.<domain>: bounces and complaints.
    const dot = host.indexOf('.');
    if (dot > 0) {
      const parent = await this.d.domainByName(host.slice(dot + 1));
      if (parent && parent.returnPathSubdomain === host.slice(0, dot)) {
        const lower = local.toLowerCase();
        if (lower.startsWith('bounces+')) {
          const messageId = this.d.verp.messageId(lower.slice('bounces+'.length));
          return messageId ? { kind: 'bounce', address, messageId } : { kind: 'refused', reason: 'no such return path (bad token)' };
        }
        if (lower === COMPLAINT_LOCAL_PART) return { kind: 'complaint', address, accountId: parent.accountId, domain: parent.name };
        return { kind: 'refused', reason: `no such address at ${host}` };
      }
    }

    const domain = await this.d.domainByName(host);
    if (!domain) return { kind: 'refused', reason: `relay access denied: ${host} is not a domain served here` };
    const routes = (await this.d.routesAt(domain.accountId, domain.name)).filter((r) => r.enabled && matches(r.recipient, address));
    if (routes.length === 0) return { kind: 'refused', reason: `no route for ${address}` };
    return { kind: 'route', address, accountId: domain.accountId, domain: domain.name, routeIds: routes.map((r) => r.id) };
  }
}

/** Whether a route's recipient pattern matches an address (case-insensitive; one `*` in the local part). */
export function matches(pattern: string, address: string): boolean {
  const p = pattern.toLowerCase();
  const a = address.toLowerCase();
  const pat = p.lastIndexOf('@');
  const aat = a.lastIndexOf('@');
  if (pat < 0 || aat < 0 || p.slice(pat + 1) !== a.slice(aat + 1)) return false;
  const pl = p.slice(0, pat);
  const al = a.slice(0, aat);
  const star = pl.indexOf('*');
  if (star < 0) return pl === al;
  const head = pl.slice(0, star);
  const tail = pl.slice(star + 1);
  return al.length >= head.length + tail.length && al.startsWith(head) && al.endsWith(tail);
}
