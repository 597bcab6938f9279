import { createHash } from 'node:crypto';
import type { IdempotencyRecord, StoredResponse } from '../store/records.ts';

export const MAX_KEY_LENGTH = 255;

/** What to do with a request that carries an Idempotency-Key, given the stored record. */
export type Decision =
  | { kind: 'execute' }
  | { kind: 'in_progress'; retryAfterSeconds: number }
  | { kind: 'mismatch' }
  | { kind: 'replay'; response: StoredResponse }
  /** The key was used by another API key (or by this one before its scopes changed). */
  | { kind: 'other_caller'; why: 'key' | 'scopes' };

/** Who presents an Idempotency-Key: the API key and a digest of its scopes (`scopesDigest`). */
export interface Caller {
  keyId: string;
  scopes: string;
}

/** A digest of a key's scopes that changes whenever one is added or taken away. */
export function scopesDigest(scopes: readonly string[]): string {
  return createHash('sha256')
    .update([...scopes].sort().join('\n'))
    .digest('base64url');
}

/** What to keep once the execution has ended with `status`. */
export type Settlement = 'complete' | 'release' | 'keep_lease';

/** SHA-256 over method, resolved path and the SHA-256 of the raw body bytes. */
export function fingerprint(method: string, path: string, rawBody: Buffer): string {
  const bodyHash = createHash('sha256').update(rawBody).digest('hex');
  return createHash('sha256').update(`${method.toUpperCase()}\n${path}\n${bodyHash}`).digest('hex');
}

/**
 * An expired record (lease run out, or replay window over) is as good as none. A live record is
 * answered only to the `caller` that made it, holding the scopes it held then; a record without
 * an owner (written by an earlier release) belongs to no one.
 */
export function decide(record: IdempotencyRecord | undefined, print: string, now: number, caller: Caller): Decision {
  if (!record || record.expiresAt <= now) return { kind: 'execute' };
  // Before anything else: another key learns nothing of the stored request, not even whether its
  // payload matches. A replay may carry a secret (a new key, a password) or show what a caller
  // with other scopes could not have done itself.
  if (record.owner?.keyId !== caller.keyId) return { kind: 'other_caller', why: 'key' };
  if (record.owner.scopes !== caller.scopes) return { kind: 'other_caller', why: 'scopes' };
  if (record.fingerprint !== print) return { kind: 'mismatch' };
  if (record.state === 'in_progress') {
    return { kind: 'in_progress', retryAfterSeconds: Math.max(1, Math.ceil((record.expiresAt - now) / 1000)) };
  }
  return { kind: 'replay', response: record.response! };
}

/**
 * 2xx and deterministic 4xx are stored and replayed; 5xx and failures release the key.
 * Secret-bearing creates store only a 2xx; their 4xx leave the key leased until it runs out.
 */
export function settle(status: number, secretBearing: boolean): Settlement {
  if (status >= 500) return 'release';
  if (status >= 400) return secretBearing ? 'keep_lease' : 'complete';
  return 'complete';
}

export function validKey(key: string): boolean {
  return key.length >= 1 && key.length <= MAX_KEY_LENGTH;
}
