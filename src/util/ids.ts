import { randomBytes, randomInt } from 'node:crypto';
import { v7 as uuidv7, validate, version } from 'uuid';

/** Time-sortable identifier: keys that embed it scan in creation order. */
export function newId(): string {
  return uuidv7();
}

export function isUuid(value: string): boolean {
  return validate(value) && version(value) >= 1;
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Uniformly random alphanumeric string from the CSPRNG (no modulo bias). */
export function randomAlphanumeric(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHANUMERIC[randomInt(ALPHANUMERIC.length)];
  return out;
}

export function randomKey(bytes = 32): Buffer {
  return randomBytes(bytes);
}
