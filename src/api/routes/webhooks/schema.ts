import { z } from 'zod';
import { MAX_TARGET_URL_LENGTH } from '../../../delivery/http-target.ts';
import { WEBHOOK_FLAGS, type WebhookFlag } from '../../../store/records.ts';
import { MAX_WEBHOOK_DOMAINS } from '../../../webhooks/webhooks.ts';

const name = z.string().max(255, 'name must be at most 255 characters');
const url = z.string().max(MAX_TARGET_URL_LENGTH, `url must be at most ${MAX_TARGET_URL_LENGTH} characters`);
const scope = z.enum(['global', 'scoped'], 'scope must be "global" or "scoped"');
const domains = z
  .array(z.string().max(253, 'domain names are at most 253 characters'), 'domains must be an array of domain names')
  .max(MAX_WEBHOOK_DOMAINS, `domains may name at most ${MAX_WEBHOOK_DOMAINS} domains`);

const flags = <T extends z.ZodType>(field: T) => Object.fromEntries(WEBHOOK_FLAGS.map((flag) => [flag, field])) as Record<WebhookFlag, T>;

/**
 * `domains` is required (non-empty) for `scoped`; for `global` it may be omitted, null, empty or
 * not, and is ignored. The URL's target rules and domain names are checked by the service.
 */
export const createWebhookBody = z
  .strictObject({
    name,
    url,
    scope,
    enabled: z.boolean().default(true),
    ...flags(z.boolean().default(false)),
    domains: domains.nullish(),
  })
  .refine((body) => body.scope === 'global' || (body.domains ?? []).length > 0, {
    message: 'domains must name at least one domain for a scoped webhook',
    path: ['domains'],
  });

/** Every field nullable: null or absent leaves it unchanged. */
export const updateWebhookBody = z.strictObject({
  name: name.nullish(),
  url: url.nullish(),
  scope: scope.nullish(),
  enabled: z.boolean().nullish(),
  ...flags(z.boolean().nullish()),
  domains: domains.nullish(),
});

const booleanText = (field: string) =>
  z
    .enum(['true', 'false'], `${field} must be true or false`)
    .transform((v) => v === 'true')
    .optional();

/** The list filters; pagination is read separately. */
export const listWebhooksQuery = z.object({
  enabled: booleanText('enabled'),
  ...(Object.fromEntries(WEBHOOK_FLAGS.map((flag) => [flag, booleanText(flag)])) as Record<WebhookFlag, ReturnType<typeof booleanText>>),
});
