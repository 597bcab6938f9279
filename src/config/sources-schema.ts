import { isIP } from 'node:net';
import { z } from 'zod';
import { isValidDomain, normalizeDomain } from '../util/domain-name.ts';
import { isUuid } from '../util/ids.ts';

/**
 * `delivery.sources`, `delivery.pools`, `delivery.default_pool`, `delivery.account_pools`: the
 * local addresses mail leaves from, and which account sends from which of them. Their
 * cross-references are checked by `checkSourceReferences`, on the delivery section.
 */

/** A source or pool name: it is the first part of a lane (`<source>/<destination>`), so never a `/`. */
const NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const name = (what: string) => z.string().regex(NAME, `a ${what} name is 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit`);

const warmup = z.strictObject({
  start: z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/, 'a date, YYYY-MM-DD')
    .refine((d) => !Number.isNaN(Date.parse(`${d}T00:00:00Z`)), 'not a valid date')
    .describe('the first day (UTC) of the warm-up: its cap is the first of daily_caps'),
  daily_caps: z
    .array(z.number().int().min(1).max(100_000_000))
    .min(1)
    .max(366)
    .describe('messages the source may send on each day (UTC) from start on; past the list it has no cap'),
});

const source = z.strictObject({
  address: z
    .string()
    .refine((a) => isIP(a) !== 0, 'not an IPv4 or IPv6 address')
    .describe('the local address sessions bind to (it must be configured on this host)'),
  ehlo: z
    .string()
    .transform(normalizeDomain)
    .refine(isValidDomain, 'not a host name')
    .describe('the EHLO name of sessions from it: the name its reverse DNS gives'),
  warmup: warmup.optional().describe('a daily cap that grows day by day; mail over it waits for another source of its pool or the next day'),
});

export const sourcesShape = {
  sources: z
    .record(name('source'), source)
    .default({})
    .describe('named local addresses mail leaves from, each with its EHLO name (none: the address the kernel picks, server.hostname)'),
  pools: z
    .record(
      name('pool'),
      z.record(name('source'), z.number().int().min(1).max(1000)).refine((m) => Object.keys(m).length > 0, 'a pool names at least one source'),
    )
    .default({})
    .describe('named sets of sources with weights: a message goes out from one of its pool, chosen by weight'),
  default_pool: name('pool').nullable().default(null).describe('the pool of accounts that have none (null: every source, each weight 1)'),
  account_pools: z
    .record(z.string().refine(isUuid, 'not an account id'), name('pool'))
    .default({})
    .describe('per account or sub account id, its pool (`postilion accounts pool` sets one in the store, which comes first)'),
};

type SourcesConfig = { [K in keyof typeof sourcesShape]: z.output<(typeof sourcesShape)[K]> };

/** Every pool, default pool and account pool names what exists. */
export function checkSourceReferences(d: SourcesConfig, ctx: z.RefinementCtx): void {
  for (const [pool, members] of Object.entries(d.pools)) {
    for (const s of Object.keys(members)) {
      if (!(s in d.sources)) ctx.addIssue({ code: 'custom', path: ['pools', pool, s], message: `no source "${s}" in delivery.sources` });
    }
  }
  if (d.default_pool !== null && !(d.default_pool in d.pools)) {
    ctx.addIssue({ code: 'custom', path: ['default_pool'], message: `no pool "${d.default_pool}" in delivery.pools` });
  }
  for (const [account, pool] of Object.entries(d.account_pools)) {
    if (!(pool in d.pools)) ctx.addIssue({ code: 'custom', path: ['account_pools', account], message: `no pool "${pool}" in delivery.pools` });
  }
  const seen = new Map<string, string>();
  for (const [s, { address }] of Object.entries(d.sources)) {
    const other = seen.get(address);
    if (other) ctx.addIssue({ code: 'custom', path: ['sources', s, 'address'], message: `${address} is the address of source "${other}" too` });
    seen.set(address, s);
  }
}
