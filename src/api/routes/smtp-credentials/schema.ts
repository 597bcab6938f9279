import { z } from 'zod';

/**
 * `domains` is required (non-empty) for `scoped`; for `global` it may be omitted, null, empty or
 * not, and is ignored. Names are normalised and checked by the service.
 */
export const createSmtpCredentialBody = z
  .strictObject({
    name: z.string().trim().min(1, 'name must not be empty').max(255, 'name must be at most 255 characters'),
    scope: z.enum(['global', 'scoped'], 'scope must be "global" or "scoped"'),
    sandbox: z.boolean().default(false),
    domains: z.array(z.string().max(253, 'domain names are at most 253 characters')).nullish(),
  })
  .refine((body) => body.scope === 'global' || (body.domains ?? []).length > 0, {
    message: 'domains must name at least one domain for a scoped credential',
    path: ['domains'],
  });
