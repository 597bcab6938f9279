/**
 * Records handed from the code that just wrote them to the code that reads them next, kept in
 * memory for a short while so that the reader does not read them back from disk. Each is kept
 * for a number of reads (`uses`) and then forgotten. When full, the oldest goes if it has been
 * kept longer than `maxAgeMs` (its reader never came), and otherwise the newcomer is not kept:
 * in a burst the first records, which are read first, stay, and the others are read from disk.
 */
export class Handover<T> {
  private readonly kept = new Map<string, { value: T; uses: number; at: number }>();
  /** Full, and nothing kept will be stale before this time: newcomers are turned away at once. */
  private fullUntil = 0;

  constructor(
    private readonly limit: number,
    private readonly maxAgeMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.kept.size;
  }

  /** Keeps `value` for `uses` reads; false when there was no room. */
  put(key: string, value: T, uses = 1): boolean {
    if (uses < 1) return false;
    const now = this.now();
    if (this.kept.size >= this.limit && !this.kept.has(key)) {
      if (now <= this.fullUntil) return false;
      const [oldestKey, oldest] = this.kept.entries().next().value!;
      if (now - oldest.at <= this.maxAgeMs) {
        this.fullUntil = oldest.at + this.maxAgeMs;
        return false;
      }
      this.kept.delete(oldestKey);
    }
    this.kept.set(key, { value, uses, at: now });
    return true;
  }

  /** The value, counting one read of it (the last read forgets it); undefined when not kept. */
  take(key: string): T | undefined {
    const entry = this.kept.get(key);
    if (!entry) return undefined;
    entry.uses -= 1;
    if (entry.uses <= 0) this.kept.delete(key);
    return entry.value;
  }

  /** The value, without counting a read. */
  peek(key: string): T | undefined {
    return this.kept.get(key)?.value;
  }

  /** Forgets the key (its record changed, or its reader has it). */
  drop(key: string): void {
    this.kept.delete(key);
  }
}
