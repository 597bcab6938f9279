import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { LookupAddress, LookupOptions } from 'node:dns';
import { rootCertificates } from 'node:tls';
import type { Config } from '../config/schema.ts';
import { parseTlsRpt } from '../delivery/tls-reports/rua.ts';
import { POLICY_PATH, policyRecord, policyText, type PublishedPolicy } from '../domains/mta-sts-policy.ts';
import { fail, ok, warn, type Check } from './check.ts';
import type { Lookups } from './lookups.ts';

/** The policy file is read up to this size (RFC 8461 leaves it to senders; 64 KiB is what they take). */
const MAX_POLICY_BYTES = 64 * 1024;
const FETCH_MS = 10_000;

/** Fetches a policy file: its text, or why it could not be had. */
export type PolicyFetcher = (host: string) => Promise<{ text: string } | { error: string }>;

/**
 * Each domain of mta_sts_policy: its `_mta-sts` TXT record (one, with an id), the policy served
 * at https://mta-sts.<domain>/.well-known/mta-sts.txt as configured (certificate verified), its
 * MX hosts covered by the policy's mx patterns, and its `_smtp._tls` TXT record for reports.
 */
export async function checkMtaStsPolicies(config: Config, lookups: Lookups, fetcher: PolicyFetcher = httpsFetcher(config, lookups)): Promise<Check[]> {
  const domains = Object.entries(config.mta_sts_policy.domains);
  const checks = await Promise.all(domains.map(([domain, policy]) => checkDomain(domain, policy, lookups, fetcher)));
  return checks.flat();
}

async function checkDomain(domain: string, policy: PublishedPolicy, lookups: Lookups, fetcher: PolicyFetcher): Promise<Check[]> {
  const text = policyText(policy);
  const asked = `(asked ${lookups.via})`;
  const [txt, served, mx, tlsrpt] = await Promise.all([
    lookups.txt(`_mta-sts.${domain}`),
    fetcher(`mta-sts.${domain}`),
    lookups.mx(domain),
    lookups.txt(`_smtp._tls.${domain}`),
  ]);

  // The TXT record: without it no sender fetches the policy.
  let announced = false;
  let txtCheck: Check;
  const name = `mta-sts ${domain}`;
  if ('error' in txt) txtCheck = warn(`${name} txt`, `TXT _mta-sts.${domain}: ${txt.error} ${asked}`);
  else {
    const records = txt.values.filter((v) => /^v=STSv1\s*(;|$)/.test(v.trim()));
    const id = records.length === 1 ? /(?:^|;)\s*id=([A-Za-z0-9]{1,32})\s*(;|$)/.exec(records[0]!) : null;
    if (records.length === 0)
      txtCheck = warn(`${name} txt`, `no TXT _mta-sts.${domain}: senders do not use the policy; publish "${policyRecord(text)}" ${asked}`);
    else if (records.length > 1)
      txtCheck = warn(`${name} txt`, `${records.length} STSv1 records at _mta-sts.${domain}: senders ignore them all; keep one ${asked}`);
    else if (!id)
      txtCheck = warn(
        `${name} txt`,
        `TXT _mta-sts.${domain} "${records[0]}" has no valid id (1 to 32 letters and digits); publish "${policyRecord(text)}" ${asked}`,
      );
    else {
      announced = true;
      txtCheck = ok(`${name} txt`, `TXT _mta-sts.${domain} published (id=${id[1]}); change the id whenever the policy changes ${asked}`);
    }
  }

  // The policy served: what senders fetch must be what is configured.
  const bad = announced && policy.mode !== 'none' ? fail : warn;
  const url = `https://mta-sts.${domain}${POLICY_PATH}`;
  let policyCheck: Check;
  if ('error' in served) policyCheck = bad(`${name} policy`, `${url} could not be fetched: ${served.error}`);
  else if (normalize(served.text) !== normalize(text))
    policyCheck = bad(
      `${name} policy`,
      `${url} serves a policy other than mta_sts_policy's (${JSON.stringify(served.text.slice(0, 200))}): point mta-sts.${domain} at this server`,
    );
  else policyCheck = ok(`${name} policy`, `${url} serves the configured policy (mode ${policy.mode})`);

  // The MX hosts: an enforcing sender delivers only to hosts the policy names.
  let mxCheck: Check;
  if ('error' in mx) mxCheck = warn(`${name} mx`, `MX ${domain}: ${mx.error} ${asked}`);
  else if (mx.values.length === 0) mxCheck = warn(`${name} mx`, `no MX record at ${domain}: the policy covers nothing ${asked}`);
  else {
    const uncovered = mx.values.filter((host) => !policy.mx.some((pattern) => mxMatches(pattern, host)));
    const worse = policy.mode === 'enforce' ? fail : warn;
    mxCheck =
      uncovered.length > 0
        ? worse(
            `${name} mx`,
            `MX ${uncovered.join(', ')} of ${domain} not matched by the policy's mx (${policy.mx.join(', ')}): enforcing senders will not deliver there ${asked}`,
          )
        : ok(`${name} mx`, `every MX of ${domain} (${mx.values.join(', ')}) is matched by the policy ${asked}`);
  }

  // TLS reporting: how the domain hears of senders' failures.
  let rptCheck: Check;
  if ('error' in tlsrpt) rptCheck = warn(`${name} tlsrpt`, `TXT _smtp._tls.${domain}: ${tlsrpt.error} ${asked}`);
  else {
    const found = parseTlsRpt(tlsrpt.values);
    if (found === null)
      rptCheck = warn(
        `${name} tlsrpt`,
        `no TXT _smtp._tls.${domain}: senders report TLS failures to no one; publish "v=TLSRPTv1; rua=mailto:<address>" ${asked}`,
      );
    else if ('problem' in found) rptCheck = warn(`${name} tlsrpt`, `TXT _smtp._tls.${domain}: ${found.problem} ${asked}`);
    else
      rptCheck = ok(
        `${name} tlsrpt`,
        `TXT _smtp._tls.${domain} published: reports to ${found.targets.map((t) => (t.kind === 'mailto' ? `mailto:${t.address}` : t.url)).join(', ')} ${asked}`,
      );
  }
  return [txtCheck, policyCheck, mxCheck, rptCheck];
}

/** RFC 8461 §4.1: an mx pattern is a host name, or `*.` and a suffix matching exactly one more label. */
export function mxMatches(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase().replace(/\.$/, '');
  const h = host.toLowerCase().replace(/\.$/, '');
  if (!p.startsWith('*.')) return p === h;
  const dot = h.indexOf('.');
  return dot > 0 && h.slice(dot + 1) === p.slice(2);
}

function normalize(text: string): string {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .join('\n');
}

/** The real fetch: HTTPS on mta_sts_policy.check_port, certificate verified for the host, bounded. */
export function httpsFetcher(config: Config, lookups: Lookups): PolicyFetcher {
  const extra = config.mta_sts_policy.check_ca_file;
  return async (host) => {
    let ca: string[] | undefined;
    if (extra !== '') {
      try {
        ca = [...rootCertificates, readFileSync(extra, 'utf8')];
      } catch (err) {
        return { error: `mta_sts_policy.check_ca_file ${extra} cannot be read: ${(err as Error).message}` };
      }
    }
    type Callback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
    const lookup = (name: string, options: LookupOptions, callback: Callback) => {
      void lookups.addresses(name).then((answer) => {
        if ('error' in answer) return callback(Object.assign(new Error(`${name}: ${answer.error}`), { code: 'EAI_AGAIN' }), '');
        if (answer.values.length === 0) return callback(Object.assign(new Error(`${name} has no address`), { code: 'ENOTFOUND' }), '');
        const list = answer.values.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
        if (options.all) callback(null, list);
        else callback(null, list[0]!.address, list[0]!.family);
      });
    };
    return new Promise((resolve) => {
      const req = https.get({ host, port: config.mta_sts_policy.check_port, path: POLICY_PATH, lookup, agent: false, ...(ca ? { ca } : {}) }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_POLICY_BYTES) req.destroy(new Error(`larger than ${MAX_POLICY_BYTES} bytes`));
          else chunks.push(chunk);
        });
        res.on('end', () => {
          if (res.statusCode !== 200) return resolve({ error: `HTTP ${res.statusCode}` });
          const type = String(res.headers['content-type'] ?? '');
          if (!/^text\/plain\b/i.test(type)) return resolve({ error: `served as ${type || 'no Content-Type'}, not text/plain` });
          resolve({ text: Buffer.concat(chunks).toString('utf8') });
        });
      });
      req.setTimeout(FETCH_MS, () => req.destroy(new Error(`no answer within ${FETCH_MS / 1000} s`)));
      req.on('error', (err) => resolve({ error: err.message }));
    });
  };
}
