import ipaddr from 'ipaddr.js';
import { stripDot } from '../domains/resolver.ts';
import { fail, ok, warn, type Check } from './check.ts';
import type { Answer, Lookups } from './lookups.ts';

/** The same address however it is written (IPv6 has many spellings). */
function sameAddress(a: string, b: string): boolean {
  try {
    return ipaddr.process(a).toNormalizedString() === ipaddr.process(b).toNormalizedString();
  } catch {
    return a === b;
  }
}

/**
 * The verdict on one sending address: OK when its PTR names server.hostname and the hostname
 * resolves back to it (forward-confirmed reverse DNS, which large receivers require); FAIL when
 * it has no PTR, a PTR naming another host, a hostname that does not resolve back to it, or DNS
 * cannot be asked. `forward` is null when it was not asked (the PTR already failed).
 */
export function judgePtr(ip: string, hostname: string, ptr: Answer, forward: Answer | null, via: string, nameIs = 'server.hostname'): Check {
  const name = `ptr ${ip}`;
  const host = stripDot(hostname);
  const asked = `(asked ${via})`;
  if ('error' in ptr) return fail(name, `PTR of ${ip}: ${ptr.error} ${asked}`);
  if (ptr.values.length === 0)
    return fail(name, `${ip} has no PTR record: receivers refuse or junk mail from it; have its provider set the PTR to ${host} ${asked}`);
  if (!ptr.values.includes(host)) return fail(name, `the PTR of ${ip} names ${ptr.values.join(', ')}, not ${nameIs} ${host} ${asked}`);
  if (forward === null) return fail(name, `${host} was not looked up`);
  if ('error' in forward) return fail(name, `PTR names ${host}, whose lookup failed: ${forward.error} ${asked}`);
  if (!forward.values.some((a) => sameAddress(a, ip))) {
    const found = forward.values.length > 0 ? forward.values.join(', ') : 'no address';
    return fail(name, `PTR names ${host}, but ${host} resolves to ${found}, not ${ip}: the reverse DNS is not forward-confirmed ${asked}`);
  }
  return ok(name, `PTR ${host}, which resolves back to ${ip} ${asked}`);
}

/** The reverse DNS of every server.sending_ips address; a WARN when none are configured. */
export async function checkSendingIps(sendingIps: string[], hostname: string, lookups: Lookups): Promise<Check[]> {
  if (sendingIps.length === 0) {
    return [
      warn(
        'ptr',
        `server.sending_ips is not configured: the reverse DNS of the addresses mail leaves from cannot be checked, and SPF asks for a:${stripDot(hostname)}`,
      ),
    ];
  }
  return Promise.all(
    sendingIps.map(async (ip) => {
      const ptr = await lookups.reverse(ip);
      const named = !('error' in ptr) && ptr.values.includes(stripDot(hostname));
      return judgePtr(ip, hostname, ptr, named ? await lookups.addresses(hostname) : null, lookups.via);
    }),
  );
}
