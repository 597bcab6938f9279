import { z } from 'zod';
import { MAX_MONTHLY_CREDIT } from '../../../accounts/sub-accounts.ts';
import { MAX_REASON } from '../../../accounts/account-status.ts';

const name = z.string().trim().min(1, 'name must not be blank').max(255, 'name must be at most 255 characters');
/** A domain name, or an http(s) URL reduced to its host (checked by SubAccounts). */
const website = z.string().max(255, 'website must be at most 255 characters');
const monthlyCredit = z
  .number()
  .int('monthly_credit must be a whole number')
  .min(0, 'monthly_credit must not be negative')
  .max(MAX_MONTHLY_CREDIT, `monthly_credit must be at most ${MAX_MONTHLY_CREDIT}`);

export const createSubAccountBody = z.strictObject({
  name,
  website,
  monthly_credit: monthlyCredit.optional(),
});

/** null or omitted keeps the current value; at least one field must be given (and change something). */
export const updateSubAccountBody = z
  .strictObject({
    name: name.nullish(),
    website: website.nullish(),
    monthly_credit: monthlyCredit.nullish(),
  })
  .refine((b) => b.name != null || b.website != null || b.monthly_credit != null, 'give at least one of name, website, monthly_credit');

export const suspendSubAccountBody = z.strictObject({
  reason: z.string().min(1, 'reason must not be empty').max(MAX_REASON, `reason must be at most ${MAX_REASON} characters`),
});
