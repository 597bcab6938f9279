import { createHash } from 'node:crypto';
import type { Config } from '../config/schema.ts';

/**
 * The MTA-STS policies (RFC 8461) this server publishes for mail sent to its inbound domains
 * (mta_sts_policy.domains): the policy file served at
 * `https://mta-sts.<domain>/.well-known/mta-sts.txt`, and the TXT record that announces it.
 */

export type PublishedPolicy = Config['mta_sts_policy']['domains'][string];

export const POLICY_PATH = '/.well-known/mta-sts.txt';

/** The policy file (§3.2): `key: value` lines, CRLF, version first. */
export function policyText(policy: PublishedPolicy): string {
  const lines = ['version: STSv1', `mode: ${policy.mode}`, ...policy.mx.map((mx) => `mx: ${mx}`), `max_age: ${policy.max_age_seconds}`];
  return lines.map((line) => `${line}\r\n`).join('');
}

/** An `id` for the `_mta-sts` TXT record that changes with the policy (§3.1: 1 to 32 letters and digits). */
export function policyId(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 20);
}

/** The TXT record announcing a policy at `_mta-sts.<domain>`. */
export function policyRecord(text: string): string {
  return `v=STSv1; id=${policyId(text)}`;
}

/** Policy files by the host that serves them (`mta-sts.<domain>`, lower case). */
export function publishedPolicies(config: Config): Record<string, string> {
  return Object.fromEntries(Object.entries(config.mta_sts_policy.domains).map(([domain, policy]) => [`mta-sts.${domain}`, policyText(policy)]));
}

/**
 * The policy file a request asks for, or null when it asks for none of them: GET or HEAD of the
 * policy path (a query string is ignored) with a Host naming a policy host (any port).
 */
export function requestedPolicy(policies: Readonly<Record<string, string>>, method: string, target: string, host: string | undefined): string | null {
  if ((method !== 'GET' && method !== 'HEAD') || !host) return null;
  if (target.split('?')[0] !== POLICY_PATH) return null;
  const name = host.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
  return Object.hasOwn(policies, name) ? policies[name]! : null;
}
