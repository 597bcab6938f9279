import { z } from 'zod';
import { isHttpUrl } from '../../../accounts/accounts.ts';
import { isPrintable } from '../../../util/text.ts';

export const website = z.string().refine(isHttpUrl, 'website must be an http(s) URL of at most 255 characters');

export const updateAccountBody = z.strictObject({
  name: z
    .string()
    .trim()
    .min(1, 'name must not be empty')
    .max(255, 'name must be at most 255 characters')
    .refine(isPrintable, 'name must not contain control characters')
    .optional(),
  website: website.optional(),
  about: z.string().max(65_535, 'about must be at most 65535 characters').optional(),
  track_opens: z.boolean().optional(),
  track_clicks: z.boolean().optional(),
  reject_bad_recipients: z.boolean().optional(),
  reject_mistyped_recipients: z.boolean().optional(),
  message_metadata_retention: z.number().int().min(1).max(30).optional(),
  message_data_retention: z.number().int().min(0).max(30).optional(),
});
