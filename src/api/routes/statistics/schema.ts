import { z } from 'zod';
import { GROUPS } from '../../../stats/statistics.ts';
import { normalizeDomain } from '../../../util/domain-name.ts';
import { isPrintable } from '../../../util/text.ts';

const rfc3339 = (field: string) => z.iso.datetime({ offset: true, error: `invalid ${field}, provide a valid RFC3339 time string` });

/** A comma list of at most `max` values, each checked by `valid`; empty items are dropped. */
const commaList = (field: string, max: number, normalize: (s: string) => string, valid: (s: string) => boolean, what: string) =>
  z
    .string()
    .max(20_000)
    .transform((v, ctx) => {
      const items = [
        ...new Set(
          v
            .split(',')
            .map((s) => normalize(s.trim()))
            .filter((s) => s.length > 0),
        ),
      ];
      if (items.length > max) ctx.addIssue({ code: 'custom', message: `${field} takes at most ${max} values` });
      const bad = items.find((s) => !valid(s));
      if (bad !== undefined) ctx.addIssue({ code: 'custom', message: `invalid ${field} "${bad.slice(0, 80)}": ${what}` });
      return items;
    });

/** A domain as the counters hold it: lower-case, no separators or spaces. */
const domainLike = (s: string) => s.length <= 253 && /^[^\s|,]+$/.test(s);

/** The query of the three statistics operations (reference-api §11). */
export const statisticsQuery = z.object({
  from_time: rfc3339('from_time').optional(),
  to_time: rfc3339('to_time').optional(),
  // The names older clients send; from_time and to_time win when both are given.
  from_date: rfc3339('from_date').optional(),
  to_date: rfc3339('to_date').optional(),
  sender_domain: commaList('sender_domain', 100, normalizeDomain, domainLike, 'must be a domain name').optional(),
  recipient_domains: commaList('recipient_domains', 100, normalizeDomain, domainLike, 'must be a domain name').optional(),
  tags: commaList(
    'tags',
    20,
    (s) => s,
    (s) => s.length <= 64 && isPrintable(s),
    'tags are 1 to 64 printable characters',
  ).optional(),
  group_by: z.enum(GROUPS, { error: `invalid group_by: one of ${GROUPS.join(', ')}` }).default('day'),
});
