/** Limits of the recent-bodies cache. */
export interface RecentBodiesLimits {
  /** All kept bodies together. */
  totalBytes: number;
  /** A larger body is read each time and not kept. */
  bodyBytes: number;
}

const DEFAULT_LIMITS: RecentBodiesLimits = { totalBytes: 8 * 1024 * 1024, bodyBytes: 1024 * 1024 };

/**
 * The bodies of the last messages sent, by body id. The recipients of one request share one
 * stored body (DESIGN.md §2), and the scheduler takes them one after another, so consecutive
 * deliveries read the same bytes: this reads them from the store once. A body never changes
 * under its id (a new body gets a new id), so nothing kept goes stale; the least recently used
 * bodies go first when the byte limit is reached. Concurrent reads of one body share one read.
 */
export class RecentBodies {
  /** In use order: the first entry is the least recently used. */
  private readonly kept = new Map<string, { body: Promise<Buffer>; bytes: number }>();
  private bytes = 0;

  constructor(
    private readonly read: (bodyId: string) => AsyncIterable<Buffer>,
    private readonly limits: RecentBodiesLimits = DEFAULT_LIMITS,
  ) {}

  get(bodyId: string): Promise<Buffer> {
    const hit = this.kept.get(bodyId);
    if (hit) {
      this.kept.delete(bodyId);
      this.kept.set(bodyId, hit);
      return hit.body;
    }
    const entry = { body: this.readAll(bodyId), bytes: 0 };
    this.kept.set(bodyId, entry);
    entry.body.then(
      (body) => {
        if (this.kept.get(bodyId) !== entry) return;
        if (body.length > this.limits.bodyBytes) {
          this.kept.delete(bodyId);
          return;
        }
        entry.bytes = body.length;
        this.bytes += body.length;
        this.evict();
      },
      // A failed read is not kept: the next caller tries again.
      () => {
        if (this.kept.get(bodyId) === entry) this.kept.delete(bodyId);
      },
    );
    return entry.body;
  }

  /** Keeps a body just stored (accepted mail is usually sent soon), unless it is too large. */
  put(bodyId: string, chunks: Buffer[]): void {
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    if (this.kept.has(bodyId) || body.length > this.limits.bodyBytes) return;
    this.kept.set(bodyId, { body: Promise.resolve(body), bytes: body.length });
    this.bytes += body.length;
    this.evict();
  }

  private async readAll(bodyId: string): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.read(bodyId)) chunks.push(chunk);
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }

  private evict(): void {
    for (const [id, entry] of this.kept) {
      if (this.bytes <= this.limits.totalBytes) return;
      this.kept.delete(id);
      this.bytes -= entry.bytes;
    }
  }
}
