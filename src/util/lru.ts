/**
 * A map of at most `max` entries that forgets the least recently used first: `get` and `set` make
 * an entry the most recent, and a `set` past `max` drops the least recent one. With `ttlMs`, an
 * entry is also forgotten once it was set that long ago (reading it does not extend it). Every
 * bounded cache of the daemon is one of these.
 *
 * A Map keeps its keys in insertion order, so moving an entry to the end (delete, then set) keeps
 * the least recent first. Expired entries are dropped when read, or in their turn as the oldest.
 */
export class Lru<K, V> {
  private readonly entries = new Map<K, { value: V; until: number }>();
  /** The key last moved to the end: reading it again (one domain, one target) moves nothing. */
  private newest: K | undefined;

  constructor(
    readonly max: number,
    private readonly ttlMs = Infinity,
    private readonly now: () => number = Date.now,
  ) {
    if (!(max >= 1)) throw new RangeError(`an Lru holds at least one entry (max: ${max})`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value, made the most recent; undefined when absent or expired. */
  get(key: K): V | undefined {
    const entry = this.live(key);
    if (entry === undefined) return undefined;
    if (key !== this.newest) {
      this.entries.delete(key);
      this.entries.set(key, entry);
      this.newest = key;
    }
    return entry.value;
  }

  /** The value, without making it the most recent. */
  peek(key: K): V | undefined {
    return this.live(key)?.value;
  }

  has(key: K): boolean {
    return this.live(key) !== undefined;
  }

  /** Keeps the value as the most recent (its expiry starts again); past `max`, the least recent goes. */
  set(key: K, value: V): this {
    this.entries.delete(key);
    this.entries.set(key, { value, until: this.ttlMs === Infinity ? Infinity : this.now() + this.ttlMs });
    this.newest = key;
    if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value as K);
    return this;
  }

  delete(key: K): boolean {
    return this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  /** The entries not expired, least recent first; deleting while iterating is safe. */
  *[Symbol.iterator](): IterableIterator<[K, V]> {
    const now = this.ttlMs === Infinity ? 0 : this.now();
    for (const [key, { value, until }] of this.entries) if (until > now) yield [key, value];
  }

  private live(key: K): { value: V; until: number } | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || entry.until === Infinity || entry.until > this.now()) return entry;
    this.entries.delete(key);
    return undefined;
  }
}
