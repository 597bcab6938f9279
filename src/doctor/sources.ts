import type { Config } from '../config/schema.ts';
import { spfRecord, type Identity } from '../domains/records.ts';
import { warmupCap } from '../delivery/sources/warmup.ts';
import { fail, type Check } from './check.ts';
import type { Lookups } from './lookups.ts';
import { judgePtr } from './reverse-dns.ts';

/**
 * Each delivery source (delivery.sources): its reverse DNS forward-confirmed and naming its EHLO
 * name, as receivers check a client, and its address in the SPF record `domains add` prints (the
 * domains' records are checked against that record with the others). Nothing when no source is
 * configured.
 */
export async function checkSources(sources: Config['delivery']['sources'], identity: Identity, lookups: Lookups, now: number): Promise<Check[]> {
  const spf = spfRecord(identity);
  return Promise.all(
    Object.entries(sources).map(async ([name, source]) => {
      const ptr = await lookups.reverse(source.address);
      const named = !('error' in ptr) && ptr.values.includes(source.ehlo);
      const verdict = judgePtr(source.address, source.ehlo, ptr, named ? await lookups.addresses(source.ehlo) : null, lookups.via, 'its EHLO name');
      const listed = spf.split(' ').some((term) => term.slice(4) === source.address);
      const cap = warmupCap(source.warmup ? { startMs: Date.parse(`${source.warmup.start}T00:00:00Z`), dailyCaps: source.warmup.daily_caps } : null, now);
      const warming = cap === null ? '' : `; warming up: ${cap} messages today`;
      if (!listed) return fail(`source ${name}`, `${source.address} is not in the SPF record domains add prints (${spf})`);
      const check: Check = { check: `source ${name}`, status: verdict.status, reason: `${verdict.reason}; in the SPF record domains add prints${warming}` };
      return check;
    }),
  );
}
