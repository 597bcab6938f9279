import { expect } from 'chai';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { EVERY_GLOBAL_SCOPE } from '../../src/accounts/scopes.ts';
import type { ConfigInput } from '../../src/config/schema.ts';
import { EventsRepo } from '../../src/store/events-repo.ts';
import type { EventRecord } from '../../src/store/records.ts';
import { startDnsServer, publishRecords, type ApiDnsRecord, type TestDnsServer } from './dns-server.ts';
import { call, ManualClock, startServer, type CallOptions, type CallResult, type TestServer } from './harness.ts';

export const HOSTNAME = 'mx.postilion.test';
export const SENDING_IP = '192.0.2.10';

/** A daemon whose resolver asks a test DNS server on loopback, on a clock the test moves. */
export interface DomainBed {
  server: TestServer;
  dns: TestDnsServer;
  clock: ManualClock;
  /** `/v2/accounts/<id>/domains` */
  base: string;
  api(method: string, path: string, options?: CallOptions): Promise<CallResult>;
  /** Creates a domain (201 expected) and returns the response body. */
  create(name: string, body?: Record<string, unknown>): Promise<ApiDomain>;
  get(name: string): Promise<ApiDomain>;
  /** POST check-dns, after moving the clock past the 60 s cache window. */
  recheck(name: string): Promise<CallResult>;
  /** Publishes every record the API lists for the domain. */
  publish(domain: ApiDomain): void;
  dnsErrors(accountId?: string): Promise<EventRecord[]>;
  stop(): Promise<void>;
}

export interface ApiDomain {
  id: string;
  domain: string;
  account_id: string;
  dns_records: Array<ApiDnsRecord & { label: string; required: boolean; propagated: boolean }>;
  dns_valid: boolean;
  last_dns_check_at: string | null;
  dkim_selector: string | null;
  rotation_ready: boolean;
  [field: string]: unknown;
}

/** `{ cache window + 1 s }`: check-dns answers from its cache for 60 s. */
export const PAST_CACHE_MS = 61_000;
export const DAY_MS = 24 * 60 * 60 * 1000;

export async function startDomainBed(config: ConfigInput = {}, options: { logLines?: string[]; dir?: string } = {}): Promise<DomainBed> {
  const dns = await startDnsServer();
  const clock = new ManualClock();
  let server: TestServer;
  try {
    server = await startServer({
      clock,
      ...(options.logLines ? { logLines: options.logLines } : {}),
      ...(options.dir ? { dir: options.dir } : {}),
      config: {
        ...config,
        dns: { ...config.dns, servers: [dns.address], timeout_ms: 500, tries: 1 },
        server: { hostname: HOSTNAME, sending_ips: [SENDING_IP] },
      },
    });
  } catch (err) {
    await dns.close();
    throw err;
  }
  const base = `/v2/accounts/${server.accountId}/domains`;
  const api = (method: string, path: string, options?: CallOptions) => call(server, method, path, options);
  const bed: DomainBed = {
    server,
    dns,
    clock,
    base,
    api,
    create: async (name, body = {}) => {
      const res = await api('POST', base, { body: { domain: name, ...body } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      return res.body as ApiDomain;
    },
    get: async (name) => {
      const res = await api('GET', `${base}/${name}`);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body as ApiDomain;
    },
    recheck: async (name) => {
      clock.advance(PAST_CACHE_MS);
      return api('POST', `${base}/${name}/check-dns`);
    },
    publish: (domain) => publishRecords(dns.zone, domain.dns_records),
    dnsErrors: (accountId = server.accountId) => new EventsRepo(server.daemon.core.store).recent(accountId, 10, 'domain.dns_error'),
    stop: async () => {
      await server.stop();
      await dns.close();
    },
  };
  return bed;
}

/** The one record of the domain matching `test`, failing the test when there is not exactly one. */
export function recordOf(domain: ApiDomain, test: (r: ApiDomain['dns_records'][number]) => boolean): ApiDomain['dns_records'][number] {
  const found = domain.dns_records.filter(test);
  expect(found, JSON.stringify(domain.dns_records, null, 1)).to.have.length(1);
  return found[0]!;
}

export const spfOf = (d: ApiDomain) => recordOf(d, (r) => r.type === 'TXT' && r.content.startsWith('v=spf1'));
export const dmarcOf = (d: ApiDomain) => recordOf(d, (r) => r.host === `_dmarc.${d.domain}`);
export const activeDkimOf = (d: ApiDomain) => recordOf(d, (r) => /^DKIM \(active, rsa\)$/.test(r.label));
/** The RSA selector in use (`dkim_selector` reports only the override, null when none is set). */
export const activeSelector = (d: ApiDomain) => activeDkimOf(d).host.split('._domainkey.')[0]!;
export const standbyDkimOf = (d: ApiDomain) => recordOf(d, (r) => r.host.includes('._domainkey.') && /standby/.test(r.label));
export const retiredDkimOf = (d: ApiDomain) => recordOf(d, (r) => r.host.includes('._domainkey.') && /retired/.test(r.label));

export interface Verified {
  selector: string | undefined;
  algorithm: string | undefined;
  result: string;
}

/** Verifies the signed message with mailauth, looking keys up through the daemon's resolver. */
export async function verifyDkim(bed: DomainBed, signed: string): Promise<Verified[]> {
  // mailauth calls resolver(name, 'TXT') and reads arrays of TXT chunks, as dns.promises.resolve gives.
  const resolver = (name: string, rrtype: string) => bed.server.daemon.core.resolver.resolve(name, rrtype) as Promise<string[][]>;
  const { results } = await dkimVerify(signed, { resolver });
  // mailauth's types name the algorithm `algorithm`; its runtime sets `algo`.
  return results.map((r) => ({ selector: r.selector, algorithm: (r as { algo?: string }).algo, result: r.status.result }));
}

export function testMessage(subject = 'Hello'): string {
  return [
    'From: Sender <sender@example.com>',
    'To: rcpt@example.org',
    `Subject: ${subject}`,
    'Message-ID: <1@example.com>',
    'Date: Sat, 21 Nov 2026 12:00:00 +0000',
    '',
    'Hello there,',
    'this body is signed.',
    '',
  ].join('\r\n');
}

/** Polls `probe` until it returns true (for work done by the daemon's own cron jobs). */
export async function eventually(probe: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A second account with its own all-powerful key: the owner of "another account's domain". */
export async function otherAccount(bed: DomainBed): Promise<{ accountId: string; key: string; base: string }> {
  const core = bed.server.daemon.core;
  const account = await core.accounts.create({ name: 'Other', website: 'https://other.example', ownerEmail: 'owner@other.example' });
  const { secret } = await core.apiKeys.create(account.id, { label: 'other admin', scopes: EVERY_GLOBAL_SCOPE });
  return { accountId: account.id, key: secret, base: `/v2/accounts/${account.id}/domains` };
}
