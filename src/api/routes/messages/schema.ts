import { z } from 'zod';
import { MESSAGE_STATUSES, SANDBOX_RESULTS } from '../../../store/records.ts';
import { isEmailAddress } from '../../../util/email.ts';
import { absent, emptyAsAbsent } from '../../validate.ts';
import { requestSubstitutionsProblem, substitutionsProblem } from '../../../message/templating.ts';

const rfc3339 = (field: string) => z.iso.datetime({ offset: true, error: `invalid ${field}, provide a valid RFC3339 time string` });
const text = absent(z.string());
/** Optional strings where an empty value can only mean "none" (an empty AMP part, disposition or time is no such thing). */
const optional = emptyAsAbsent(z.string());

export const address = z.strictObject({
  email: z.string().max(254, 'email addresses are at most 254 characters'),
  name: text,
});

export const attachment = z.strictObject({
  base64: absent(z.boolean()),
  data: z.string(),
  content_type: z.string().min(1).max(255),
  content_disposition: optional,
  content_id: absent(z.string().max(255)),
  file_name: z.string().min(1).max(255),
});

/** Whole days from `min` to 30, or null. */
function days(field: string, min: number) {
  const range = `${field} must be between ${min} and 30 days`;
  return z.number().int(`${field} must be a whole number of days`).min(min, range).max(30, range).nullish();
}

/** The fields both v2 send operations share. */
const common = {
  from: address,
  reply_to: absent(address),
  subject: z.string().max(998, 'subject is at most 998 characters'),
  text_content: optional,
  html_content: optional,
  amp_content: optional,
  attachments: absent(z.array(attachment).max(100, 'at most 100 attachments')),
  headers: absent(z.record(z.string(), z.string())),
  tags: absent(z.array(z.string())),
  sandbox: absent(z.boolean()),
  sandbox_result: emptyAsAbsent(z.enum(SANDBOX_RESULTS, { error: `sandbox_result must be one of ${SANDBOX_RESULTS.join(', ')}` })),
  tracking: absent(z.strictObject({ open: z.boolean().nullish(), click: z.boolean().nullish() })),
  retention: absent(
    z.strictObject({
      metadata: days('retention.metadata', 1),
      data: days('retention.data', 0),
    }),
  ),
  schedule: absent(
    z.strictObject({
      first_attempt: emptyAsAbsent(rfc3339('schedule.first_attempt')),
      expires: emptyAsAbsent(rfc3339('schedule.expires')),
    }),
  ),
};

/** Bounded before anything walks it recursively (checkSubstitutions, the template context). */
const substitutions = z.record(z.string(), z.unknown()).superRefine((values, ctx) => {
  const problem = substitutionsProblem(values);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

export const createMessageBody = z
  .strictObject({
    ...common,
    recipients: z
      .array(
        z.strictObject({
          email: z.string().max(254, 'email addresses are at most 254 characters'),
          name: text,
          substitutions: absent(substitutions),
        }),
      )
      .min(1, 'at least one recipient is required')
      .max(100, 'at most 100 recipients per request'),
    substitutions: absent(substitutions),
  })
  .superRefine((body, ctx) => {
    const problem = requestSubstitutionsProblem([body.substitutions, ...body.recipients.map((r) => r.substitutions)]);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

const addressList = (field: string) => z.array(address).min(1, `${field} must have 1 to 50 recipients`).max(50, `${field} must have 1 to 50 recipients`);

export const createConversationBody = z.strictObject({
  ...common,
  to: addressList('to'),
  cc: absent(addressList('cc')),
  bcc: absent(addressList('bcc')),
});

const commaList = (field: string, values?: readonly string[], max = 100) =>
  z.string().transform((v, ctx) => {
    const items = v
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
    if (items.length > max) ctx.addIssue({ code: 'custom', message: `${field} takes at most ${max} values` });
    const unknown = values ? items.filter((s) => !values.includes(s)) : [];
    if (unknown.length > 0) ctx.addIssue({ code: 'custom', message: `invalid ${field} "${unknown[0]}": one of ${values!.join(', ')}` });
    return items;
  });

/** An address to filter on (the contract's `format: email`): anything else can match nothing. */
const emailFilter = z.string().refine(isEmailAddress, 'must be an email address');

export const listMessagesQuery = z.object({
  status: commaList('status', MESSAGE_STATUSES).optional(),
  sender: emailFilter.optional(),
  recipient: emailFilter.optional(),
  subject: z.string().max(998).optional(),
  message_id_header: z.string().max(998).optional(),
  tags: commaList('tags', undefined, 20).optional(),
  from_time: rfc3339('from_time').optional(),
  to_time: rfc3339('to_time').optional(),
});
