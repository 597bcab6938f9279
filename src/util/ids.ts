import { randomBytes, randomFillSync, randomInt } from 'node:crypto';
import { validate, version } from 'uuid';

/**
 * Ids are UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a 32-bit counter around the
 * version and variant bits that counts up within a millisecond (so ids sort in the order they
 * were made), then 42 random bits from the CSPRNG. Made here rather than by the uuid package: a message accepted and
 * delivered with its webhooks makes some ten ids, and the package's per-id typed arrays and
 * refill of a 256-byte pool every 16 ids were a few per cent of the main thread.
 */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let poolAt = POOL_BYTES;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** Where 16 unused random bytes begin in the pool. */
function random16(): number {
  if (poolAt > POOL_BYTES - 16) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const at = poolAt;
  poolAt += 16;
  return at;
}

/** The UUIDv7 of `msecs` and `seq` (the bit layout of the uuid package's v7), its tail random. */
function format(msecs: number, seq: number): string {
  const r = random16();
  const h = HEX;
  return (
    h[(msecs / 0x10000000000) & 0xff]! +
    h[(msecs / 0x100000000) & 0xff]! +
    h[(msecs / 0x1000000) & 0xff]! +
    h[(msecs / 0x10000) & 0xff]! +
    '-' +
    h[(msecs / 0x100) & 0xff]! +
    h[msecs & 0xff]! +
    '-' +
    h[0x70 | ((seq >>> 28) & 0x0f)]! +
    h[(seq >>> 20) & 0xff]! +
    '-' +
    h[0x80 | ((seq >>> 14) & 0x3f)]! +
    h[(seq >>> 6) & 0xff]! +
    '-' +
    h[((seq << 2) & 0xff) | (pool[r + 10]! & 0x03)]! +
    h[pool[r + 11]!]! +
    h[pool[r + 12]!]! +
    h[pool[r + 13]!]! +
    h[pool[r + 14]!]! +
    h[pool[r + 15]!]!
  );
}

const clockState = { msecs: -Infinity, seq: 0 };

/** Time-sortable identifier: keys that embed it scan in creation order. */
export function newId(): string {
  const now = Date.now();
  if (now > clockState.msecs) {
    clockState.msecs = now;
    const r = random16();
    clockState.seq = (pool[r + 6]! << 23) | (pool[r + 7]! << 16) | (pool[r + 8]! << 8) | pool[r + 9]!;
  } else {
    clockState.seq = (clockState.seq + 1) | 0;
    // The counter wrapped: the next millisecond's ids (still after these).
    if (clockState.seq === 0) clockState.msecs += 1;
  }
  return format(clockState.msecs, clockState.seq);
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
  return format(msecs, sequence.seq);
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
