import { randomBytes, randomInt } from 'node:crypto';
import { v7 as uuidv7, validate, version } from 'uuid';

/** Time-sortable identifier: keys that embed it scan in creation order. */
export function newId(): string {
  return uuidv7();
}

const sequence = { msecs: -1, seq: 0 };

/**
 * A UUIDv7 whose time part is `ms` (the injected clock's time, so ids sort with created_at).
 * Ids made in the same millisecond count up, so they sort in creation order too.
 */
export function newIdAt(ms: number): string {
  const msecs = Math.floor(ms);
  if (msecs === sequence.msecs) sequence.seq = (sequence.seq + 1) & 0x7fffffff;
  else {
    sequence.msecs = msecs;
    sequence.seq = randomInt(0x40000000);
  }
  return uuidv7({ msecs, seq: sequence.seq });
}

/** The lowest id string of any UUIDv7 made at or after `ms`: its time part, hex, dashed. */
export function idFloor(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}`;
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
