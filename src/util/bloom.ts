/**
 * A Bloom filter over strings: `mayContain` is false only for a string never added, and true
 * for one added (and, rarely, for one that was not). There is no removal; rebuild to forget.
 * Sized for `capacity` strings at about 1 % false positives (10 bits and 7 probes per string).
 */
export class BloomFilter {
  private readonly words: Uint32Array;
  private readonly bits: number;
  private added = 0;

  constructor(readonly capacity: number) {
    this.bits = Math.max(64, Math.ceil((Math.max(1, capacity) * BITS_PER_ENTRY) / 32) * 32);
    this.words = new Uint32Array(this.bits / 32);
  }

  /** Strings added so far (a string added twice counts twice). */
  get size(): number {
    return this.added;
  }

  add(value: string): void {
    this.added += 1;
    this.probe(value, (bit) => {
      this.words[bit >>> 5]! |= 1 << (bit & 31);
      return true;
    });
  }

  mayContain(value: string): boolean {
    return this.probe(value, (bit) => (this.words[bit >>> 5]! & (1 << (bit & 31))) !== 0);
  }

  /** Visits the string's PROBES bit positions (double hashing) while `visit` says true. */
  private probe(value: string, visit: (bit: number) => boolean): boolean {
    const h1 = fnv1a(value, 0x811c9dc5);
    const h2 = fnv1a(value, 0x01000193) | 1;
    for (let i = 0; i < PROBES; i++) {
      if (!visit(((h1 + Math.imul(i, h2)) >>> 0) % this.bits)) return false;
    }
    return true;
  }
}

const BITS_PER_ENTRY = 10;
const PROBES = 7;

/** 32-bit FNV-1a over UTF-16 code units, from `seed`. */
function fnv1a(value: string, seed: number): number {
  let hash = seed >>> 0;
  for (let i = 0; i < value.length; i++) {
    hash ^= value.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
