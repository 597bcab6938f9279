import { z } from 'zod';
import { MAX_TARGET_URL_LENGTH } from '../../../delivery/http-target.ts';

const name = z.string().max(255, 'name must be at most 255 characters');
const url = z.string().max(MAX_TARGET_URL_LENGTH, `url must be at most ${MAX_TARGET_URL_LENGTH} characters`);
const recipient = z.string().max(255, 'recipient must be at most 255 characters');

/** The recipient pattern and the URL's target rules are checked by the service. */
export const createRouteBody = z.strictObject({
  name,
  url,
  recipient,
  attachments: z.boolean().default(false),
  headers: z.boolean().default(false),
  group_by_message_id: z.boolean().default(false),
  strip_replies: z.boolean().default(false),
  enabled: z.boolean().default(true),
});

/** Every field nullable: null or absent leaves it unchanged. */
export const updateRouteBody = z.strictObject({
  name: name.nullish(),
  url: url.nullish(),
  recipient: recipient.nullish(),
  attachments: z.boolean().nullish(),
  headers: z.boolean().nullish(),
  group_by_message_id: z.boolean().nullish(),
  strip_replies: z.boolean().nullish(),
  enabled: z.boolean().nullish(),
});

/** The list filter; pagination is read separately. */
export const listRoutesQuery = z.object({
  domain: z.string().max(253, 'domain must be at most 253 characters').optional(),
});
