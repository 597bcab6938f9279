import { z } from 'zod';

const label = z.string().trim().min(1, 'label must not be empty').max(255, 'label must be at most 255 characters');
const scopes = z.array(z.string()).min(1, 'scopes must hold at least one scope');
const ipAllowList = z.array(z.string());

export const createApiKeyBody = z.strictObject({
  label,
  scopes,
  ip_allow_list: ipAllowList.optional(),
});

/** null or omitted keeps the current value; `ip_allow_list: []` clears the list. */
export const updateApiKeyBody = z.strictObject({
  label: label.nullish(),
  scopes: scopes.nullish(),
  ip_allow_list: ipAllowList.nullish(),
});
