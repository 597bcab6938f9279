import { z } from 'zod';

const subdomain = z.string();
const settings = {
  tracking_subdomain: subdomain.optional(),
  return_path_subdomain: subdomain.optional(),
  subscription_subdomain: subdomain.optional(),
  media_subdomain: subdomain.optional(),
  dkim_rotation_interval_days: z.number().int('dkim_rotation_interval_days must be a whole number').nullable().optional(),
  dkim_selector: z.string().max(256).nullable().optional(),
  /** Not in the reference request schemas: where DSNs for this domain's bounces go. */
  dsn_recipient: z.string().max(254).nullable().optional(),
};

export const createDomainBody = z.strictObject({
  domain: z.string().max(300),
  dkim_private_key: z.string().max(20_000).optional(),
  ...settings,
});

export const updateDomainBody = z.strictObject(settings);

export const listDomainsQuery = z.object({
  dns_valid: z.enum(['true', 'false'], { error: 'dns_valid must be true or false' }).optional(),
});
