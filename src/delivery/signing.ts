import { createHmac, randomInt } from 'node:crypto';

/**
 * Standard-Webhooks-shaped signatures with one deliberate deviation (reference-api §5.3): the
 * HMAC key is the UTF-8 bytes of the whole secret string, prefix included, not a base64-decoded
 * `whsec_` value. Stock verifiers work in raw-key mode (`new Webhook(secret, { format: 'raw' })`).
 * The HTTP dispatcher signs webhook deliveries and route POSTs alike, so the scheme and its secrets
 * live here, below webhooks/ and inbound/, which make the secrets.
 */

export const WEBHOOK_SECRET_PREFIX = 'aha-whsec-';
const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Route secrets: `aha-rsec-` + 64 characters, signed with the same scheme. */
export const ROUTE_SECRET_PREFIX = 'aha-rsec-';

/** `aha-whsec-` + 64 characters of [A-Za-z0-9] from the CSPRNG (randomInt is unbiased). */
export function newWebhookSecret(): string {
  return newSecret(WEBHOOK_SECRET_PREFIX);
}

/** `prefix` + 64 characters of [A-Za-z0-9] from the CSPRNG. */
export function newSecret(prefix: string): string {
  let out = prefix;
  for (let i = 0; i < 64; i++) out += ALPHANUMERIC[randomInt(ALPHANUMERIC.length)];
  return out;
}

/**
 * `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed with the secret's UTF-8 bytes;
 * a body in parts is signed part by part, as it is sent.
 */
export function signPayload(secret: string, id: string, timestampSeconds: number, body: string | Buffer | readonly Buffer[]): string {
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8'));
  mac.update(`${id}.${timestampSeconds}.`);
  if (typeof body === 'string' || Buffer.isBuffer(body)) mac.update(body);
  else for (const part of body) mac.update(part);
  return `v1,${mac.digest('base64')}`;
}

/** The three headers of a signed delivery. */
export interface SignatureHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

export function signatureHeaders(secret: string, id: string, timestampSeconds: number, body: string | Buffer | readonly Buffer[]): SignatureHeaders {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signPayload(secret, id, timestampSeconds, body),
  };
}
