import { z } from 'zod';
import { isEmailAddress } from '../../../util/email.ts';
import { absent } from '../../validate.ts';

const rfc3339 = (field: string) => z.iso.datetime({ offset: true, error: `invalid ${field}, provide a valid RFC3339 time string` });
const email = (field: string) => z.string().refine(isEmailAddress, `${field} must be a valid email address`);
const domain = z.string().min(1, 'domain must not be empty').max(253, 'domain is at most 253 characters');

export const listSuppressionsQuery = z.object({
  domain: domain.optional(),
  email: email('email').optional(),
  from_time: rfc3339('from_time').optional(),
  to_time: rfc3339('to_time').optional(),
});

export const createSuppressionBody = z.strictObject({
  email: email('email'),
  domain: absent(domain),
  reason: absent(z.string().max(255, 'reason is at most 255 characters')),
  expires_at: rfc3339('expires_at'),
});

export const deleteSuppressionQuery = z.object({
  email: email('email'),
  domain: domain.optional(),
});

export const wipeSuppressionsQuery = z.object({
  domain: domain.optional(),
});
