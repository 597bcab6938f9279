import { createHash } from 'node:crypto';
import type { IdempotencyRecord, StoredResponse } from '../store/records.ts';

export const MAX_KEY_LENGTH = 255;

/** What to do with a request that carries an Idempotency-Key, given the stored record. */
export type Decision =
  | { kind: 'execute' }
  | { kind: 'in_progress'; retryAfterSeconds: number }
  | { kind: 'mismatch' }
  | { kind: 'replay'; response: StoredResponse };

/** What to keep once the execution has ended with `status`. */
export type Settlement = 'complete' | 'release' | 'keep_lease';

/** SHA-256 over method, resolved path and the SHA-256 of the raw body bytes. */
export function fingerprint(method: string, path: string, rawBody: Buffer): string {
  const bodyHash = createHash('sha256').update(rawBody).digest('hex');
  return createHash('sha256').update(`${method.toUpperCase()}\n${path}\n${bodyHash}`).digest('hex');
}

/** An expired record (lease run out, or replay window over) is as good as none. */
export function decide(record: IdempotencyRecord | undefined, print: string, now: number): Decision {
  if (!record || record.expiresAt <= now) return { kind: 'execute' };
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
