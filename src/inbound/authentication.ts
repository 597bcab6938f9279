import { authenticate } from 'mailauth';
import type { DnsResolver } from '../domains/resolver.ts';
import { chunksStream } from '../util/chunks-stream.ts';

export interface Arrival {
  /** The client's address, HELO name and MAIL FROM as received. */
  ip: string;
  helo: string;
  sender: string;
}

/**
 * SPF, DKIM and DMARC of an inbound message, checked with mailauth through the configured
 * resolver (`dns.servers`): the value of the `Authentication-Results` header it makes, or null
 * when the checks could not be run at all.
 */
export async function authenticationResults(raw: readonly Buffer[], arrival: Arrival, hostname: string, resolver: DnsResolver): Promise<string | null> {
  try {
    const result = await authenticate(chunksStream(raw), {
      ip: arrival.ip.replace(/^::ffff:/, ''),
      helo: arrival.helo,
      sender: arrival.sender,
      mta: hostname,
      resolver: (name: string, rrtype: string) => resolver.resolve(name, rrtype),
      disableArc: true,
      disableBimi: true,
    } as Parameters<typeof authenticate>[1]);
    const unfolded = result.headers.replace(/\r?\n[ \t]+/g, ' ');
    const m = /^Authentication-Results:[ \t]*(.*)$/im.exec(unfolded);
    return m ? m[1]!.trim() : null;
  } catch {
    return null;
  }
}
