import { Lru } from '../util/lru.ts';

/** A cached family and how many of its records are kept at most (then the least recently used go). */
export type CacheLimits = ReadonlyMap<string, number>;

/**
 * Records of some families kept in memory after their first read. A write of a key drops it
 * before and after the write, and a read that a write of its key overlapped is not kept: what is
 * kept is always what the store holds. Absent keys are not kept (unknown API keys must not grow
 * memory). Kept records are frozen: they are shared between callers, and an accidental mutation
 * throws. Nothing is held per key beyond the records and the reads and writes in progress.
 */
export class ReadCache {
  private readonly kept = new Map<string, Lru<string, unknown>>();
  /** Per key: writes submitted and not yet landed. */
  private readonly inFlight = new Map<string, number>();
  /** Per key: the reads in progress, each told when a write of the key ended meanwhile (landed or failed). */
  private readonly reads = new Map<string, Set<{ overtaken: boolean }>>();

  constructor(private readonly limits: CacheLimits) {}

  caches(family: string): boolean {
    return this.limits.has(family);
  }

  async get<T>(family: string, key: string, read: () => Promise<T | undefined>): Promise<T | undefined> {
    const hit = this.family(family).get(key);
    if (hit !== undefined) return hit as T;
    const reading = this.track(family, key);
    let value: T | undefined;
    try {
      value = await read();
    } finally {
      this.untrack(reading);
    }
    this.keep(family, key, reading, value);
    return value;
  }

  /**
   * Several records in one read of those not kept (`readMany` gets them in the order asked), kept
   * as `get` keeps them.
   */
  async getMany<T>(family: string, keys: readonly string[], readMany: (keys: string[]) => Promise<Array<T | undefined>>): Promise<Array<T | undefined>> {
    const kept = this.family(family);
    const out = new Array<T | undefined>(keys.length);
    const missing: number[] = [];
    for (let i = 0; i < keys.length; i++) {
      const hit = kept.get(keys[i]!);
      if (hit !== undefined) out[i] = hit as T;
      else missing.push(i);
    }
    if (missing.length === 0) return out;
    const readings = missing.map((i) => this.track(family, keys[i]!));
    let values: Array<T | undefined>;
    try {
      values = await readMany(missing.map((i) => keys[i]!));
    } finally {
      for (const reading of readings) this.untrack(reading);
    }
    for (const [n, i] of missing.entries()) {
      out[i] = values[n];
      this.keep(family, keys[i]!, readings[n]!, values[n]);
    }
    return out;
  }

  /** A read of the key begins: a write of it landing meanwhile marks it overtaken. */
  private track(family: string, key: string): Reading {
    const id = cacheKey(family, key);
    const token = { overtaken: false };
    const reads = this.reads.get(id) ?? new Set();
    reads.add(token);
    this.reads.set(id, reads);
    return { id, token };
  }

  private untrack({ id, token }: Reading): void {
    const reads = this.reads.get(id)!;
    reads.delete(token);
    if (reads.size === 0) this.reads.delete(id);
  }

  /** Keeps what a read found, unless it is absent or a write of its key overtook it or is under way. */
  private keep(family: string, key: string, { id, token }: Reading, value: unknown): void {
    if (value === undefined || token.overtaken || this.inFlight.has(id)) return;
    this.family(family).set(key, deepFreeze(value));
  }

  /** Runs a write of these keys (those of uncached families are ignored). */
  async writing<T>(keys: ReadonlyArray<{ family: string; key: string }>, write: () => Promise<T>): Promise<T> {
    const ids = keys.filter(({ family }) => this.limits.has(family));
    if (ids.length === 0) return write();
    for (const { family, key } of ids) {
      this.family(family).delete(key);
      const id = cacheKey(family, key);
      this.inFlight.set(id, (this.inFlight.get(id) ?? 0) + 1);
    }
    try {
      return await write();
    } finally {
      for (const { family, key } of ids) {
        this.family(family).delete(key);
        const id = cacheKey(family, key);
        for (const read of this.reads.get(id) ?? []) read.overtaken = true;
        const left = this.inFlight.get(id)! - 1;
        if (left === 0) this.inFlight.delete(id);
        else this.inFlight.set(id, left);
      }
    }
  }

  /**
   * Another writer (a node of the cluster) changed these keys of the family (null: any of its
   * keys): what is kept of them goes, and reads of them in progress are not kept.
   */
  invalidate(family: string, keys: readonly string[] | null): void {
    if (!this.limits.has(family)) return;
    if (keys === null) {
      this.kept.delete(family);
      const prefix = cacheKey(family, '');
      for (const [id, reads] of this.reads) if (id.startsWith(prefix)) for (const read of reads) read.overtaken = true;
      return;
    }
    const kept = this.kept.get(family);
    for (const key of keys) {
      kept?.delete(key);
      for (const read of this.reads.get(cacheKey(family, key)) ?? []) read.overtaken = true;
    }
  }

  private family(family: string): Lru<string, unknown> {
    let kept = this.kept.get(family);
    if (!kept) {
      kept = new Lru(this.limits.get(family)!);
      this.kept.set(family, kept);
    }
    return kept;
  }
}

const cacheKey = (family: string, key: string) => `${family}\u0000${key}`;

/** A read in progress of one key. */
interface Reading {
  id: string;
  token: { overtaken: boolean };
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
