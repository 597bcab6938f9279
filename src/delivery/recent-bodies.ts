/** Limits of the recent-bodies cache. */
export interface RecentBodiesLimits {
  /** All kept bodies together. */
  totalBytes: number;
  /** A larger body is read each time and not kept. */
  bodyBytes: number;
  /** How long a body put in for sends still to come is held against newer ones. */
  holdMs: number;
}

const DEFAULT_LIMITS: RecentBodiesLimits = { totalBytes: 32 * 1024 * 1024, bodyBytes: 1024 * 1024, holdMs: 10 * 60_000 };

interface Kept {
  body: Promise<Buffer>;
  bytes: number;
  /** Sends announced at acceptance that have not been done yet (released). */
  awaited: number;
  /** Until when those sends hold the body in (a message cancelled or purged never asks). */
  heldUntil: number;
}

/**
 * The bodies of messages about to be sent, by body id, so that delivery does not read back what
 * was just accepted. A body never changes under its id (a new body gets a new id), so nothing
 * kept goes stale.
 *
 * A body put in at acceptance is held until its announced sends are done (each releases it,
 * whether it came to read the body or not: a suppressed recipient never does), or `holdMs`
 * passed: the queue sends in acceptance order, so pushing the oldest out for a newer one would
 * miss every time once the queue is longer than the cache. When what is not held cannot make
 * room, a new body is not kept (and nothing is dropped for it); its sends read it from the store.
 * Bodies read on a miss, and bodies whose sends are done (a deferred retry may still come), go
 * least recently used first. Concurrent reads of one body share one read.
 */
export class RecentBodies {
  /** In use order: the first entry is the least recently used. */
  private readonly kept = new Map<string, Kept>();
  private bytes = 0;

  constructor(
    private readonly read: (bodyId: string) => AsyncIterable<Buffer>,
    private readonly limits: RecentBodiesLimits = DEFAULT_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  get(bodyId: string): Promise<Buffer> {
    const hit = this.kept.get(bodyId);
    if (hit) {
      this.kept.delete(bodyId);
      this.kept.set(bodyId, hit);
      return hit.body;
    }
    const entry: Kept = { body: this.readAll(bodyId), bytes: 0, awaited: 0, heldUntil: 0 };
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
        this.evict(0);
      },
      // A failed read is not kept: the next caller tries again.
      () => {
        if (this.kept.get(bodyId) === entry) this.kept.delete(bodyId);
      },
    );
    return entry.body;
  }

  /**
   * Keeps a body just stored for `sends` deliveries about to ask for it, unless it is too large
   * or the cache is full of bodies still awaited.
   */
  put(bodyId: string, chunks: Buffer[], sends = 1): void {
    const present = this.kept.get(bodyId);
    if (present) {
      present.awaited += sends;
      present.heldUntil = this.now() + this.limits.holdMs;
      return;
    }
    const bytes = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
    if (bytes > this.limits.bodyBytes || !this.evict(bytes)) return;
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes);
    this.kept.set(bodyId, { body: Promise.resolve(body), bytes, awaited: sends, heldUntil: this.now() + this.limits.holdMs });
    this.bytes += bytes;
  }

  /** One announced send of the body is done (sent, or not to be sent): it holds the body no more. */
  release(bodyId: string): void {
    const entry = this.kept.get(bodyId);
    if (entry && entry.awaited > 0) entry.awaited -= 1;
  }

  /**
   * Makes room for `incoming` more bytes by dropping what is not held, least recently used
   * first; drops nothing and answers false when that cannot make room. (A read in progress
   * counts no bytes yet: dropping it would free nothing and lose the shared read.)
   */
  private evict(incoming: number): boolean {
    const over = this.bytes + incoming - this.limits.totalBytes;
    if (over <= 0) return true;
    const now = this.now();
    const droppable = (entry: Kept) => entry.bytes > 0 && !(entry.awaited > 0 && entry.heldUntil > now);
    let free = 0;
    for (const entry of this.kept.values()) if (droppable(entry)) free += entry.bytes;
    if (free < over) return false;
    for (const [id, entry] of this.kept) {
      if (!droppable(entry)) continue;
      this.kept.delete(id);
      this.bytes -= entry.bytes;
      if (this.bytes + incoming <= this.limits.totalBytes) break;
    }
    return true;
  }

  private async readAll(bodyId: string): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.read(bodyId)) chunks.push(chunk);
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }
}
