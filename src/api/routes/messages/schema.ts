import { z } from 'zod';
import { MESSAGE_STATUSES, SANDBOX_RESULTS } from '../../../store/records.ts';

const rfc3339 = (field: string) => z.iso.datetime({ offset: true, error: `invalid ${field}, provide a valid RFC3339 time string` });
const text = z.string().nullish().transform((v) => v ?? undefined);

export const address = z.strictObject({
  email: z.string().max(254, 'email addresses are at most 254 characters'),
  name: text,
});

export const attachment = z.strictObject({
  base64: z.boolean().nullish().transform((v) => v ?? undefined),
  data: z.string(),
  content_type: z.string().min(1).max(255),
  content_disposition: text,
  content_id: z.string().max(255).nullish().transform((v) => v ?? undefined),
  file_name: z.string().min(1).max(255),
});

/** The fields both v2 send operations share. */
const common = {
  from: address,
  reply_to: address.nullish().transform((v) => v ?? undefined),
  subject: z.string().max(998, 'subject is at most 998 characters'),
  text_content: text,
  html_content: text,
  amp_content: text,
  attachments: z.array(attachment).max(100, 'at most 100 attachments').nullish().transform((v) => v ?? undefined),
  headers: z.record(z.string(), z.string()).nullish().transform((v) => v ?? undefined),
  tags: z.array(z.string()).nullish().transform((v) => v ?? undefined),
  sandbox: z.boolean().nullish().transform((v) => v ?? undefined),
  sandbox_result: z.enum(SANDBOX_RESULTS, { error: `sandbox_result must be one of ${SANDBOX_RESULTS.join(', ')}` }).nullish().transform((v) => v ?? undefined),
  tracking: z.strictObject({ open: z.boolean().nullish(), click: z.boolean().nullish() }).nullish().transform((v) => v ?? undefined),
  retention: z.strictObject({
    metadata: z.number().int('retention.metadata must be a whole number of days').min(1, 'retention.metadata must be between 1 and 30 days').max(30, 'retention.metadata must be between 1 and 30 days').nullish(),
    data: z.number().int('retention.data must be a whole number of days').min(0, 'retention.data must be between 0 and 30 days').max(30, 'retention.data must be between 0 and 30 days').nullish(),
  }).nullish().transform((v) => v ?? undefined),
  schedule: z.strictObject({
    first_attempt: rfc3339('schedule.first_attempt').nullish().transform((v) => v ?? undefined),
    expires: rfc3339('schedule.expires').nullish().transform((v) => v ?? undefined),
  }).nullish().transform((v) => v ?? undefined),
};

const substitutions = z.record(z.string(), z.unknown());

export const createMessageBody = z.strictObject({
  ...common,
  recipients: z.array(z.strictObject({
    email: z.string().max(254, 'email addresses are at most 254 characters'),
    name: text,
    substitutions: substitutions.nullish().transform((v) => v ?? undefined),
  })).min(1, 'at least one recipient is required').max(100, 'at most 100 recipients per request'),
  substitutions: substitutions.nullish().transform((v) => v ?? undefined),
});

const addressList = (field: string) => z.array(address).min(1, `${field} must have 1 to 50 recipients`).max(50, `${field} must have 1 to 50 recipients`);

export const createConversationBody = z.strictObject({
  ...common,
  to: addressList('to'),
  cc: addressList('cc').optional(),
  bcc: addressList('bcc').optional(),
});

const commaList = (field: string, values?: readonly string[], max = 100) =>
  z.string().transform((v, ctx) => {
    const items = v.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
    if (items.length > max) ctx.addIssue({ code: 'custom', message: `${field} takes at most ${max} values` });
    const unknown = values ? items.filter((s) => !values.includes(s)) : [];
    if (unknown.length > 0) ctx.addIssue({ code: 'custom', message: `invalid ${field} "${unknown[0]}": one of ${values!.join(', ')}` });
    return items;
  });

export const listMessagesQuery = z.object({
  status: commaList('status', MESSAGE_STATUSES).optional(),
  sender: z.string().max(254).optional(),
  recipient: z.string().max(254).optional(),
  subject: z.string().max(998).optional(),
  message_id_header: z.string().max(998).optional(),
  tags: commaList('tags', undefined, 20).optional(),
  from_time: rfc3339('from_time').optional(),
  to_time: rfc3339('to_time').optional(),
});
