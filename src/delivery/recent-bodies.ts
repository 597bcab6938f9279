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
  /** The body as it was stored or read, chunk by chunk: never joined. */
  body: Promise<readonly Buffer[]>;
  /** Its read from the store is in progress: it counts no bytes yet, and is never dropped. */
  reading: boolean;
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
 *
 * Held and loose bodies are kept apart, with the bytes of each, so that no step walks the
 * whole cache however full it is: a hold that ends, or a body dropped, is met once.
 */
export class RecentBodies {
  /**
   * Bodies held for sends to come, in the order their holds end (holdMs is fixed; if the clock
   * steps back, holds begun since end late by as much).
   */
  private readonly held = new Map<string, Kept>();
  /** The others, in use order: the first is the least recently used. */
  private readonly loose = new Map<string, Kept>();
  private heldBytes = 0;
  private looseBytes = 0;

  constructor(
    private readonly read: (bodyId: string) => AsyncIterable<Buffer>,
    private readonly limits: RecentBodiesLimits = DEFAULT_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  /** The body in one buffer. */
  async get(bodyId: string): Promise<Buffer> {
    const chunks = await this.parts(bodyId);
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }

  /**
   * The body as its chunks, in order: what delivery writes to the connection one after another,
   * so that no attempt copies it. A body too large to keep is read for each call.
   */
  parts(bodyId: string): Promise<readonly Buffer[]> {
    const held = this.held.get(bodyId);
    if (held) return held.body;
    const loose = this.loose.get(bodyId);
    if (loose) {
      this.loose.delete(bodyId);
      this.loose.set(bodyId, loose);
      return loose.body;
    }
    const entry: Kept = { body: this.readAll(bodyId), reading: true, bytes: 0, awaited: 0, heldUntil: 0 };
    this.loose.set(bodyId, entry);
    entry.body.then(
      (body) => {
        if (this.loose.get(bodyId) !== entry) return;
        const bytes = byteLength(body);
        if (bytes > this.limits.bodyBytes) {
          this.loose.delete(bodyId);
          return;
        }
        entry.reading = false;
        entry.bytes = bytes;
        this.looseBytes += bytes;
        // Always possible: this body alone is droppable and at most as large as the excess.
        this.makeRoom(0);
      },
      // A failed read is not kept: the next caller tries again.
      () => {
        if (this.loose.get(bodyId) === entry) this.loose.delete(bodyId);
      },
    );
    return entry.body;
  }

  /**
   * Keeps a body just stored for `sends` deliveries about to ask for it, unless it is too large
   * or the cache is full of bodies still awaited.
   */
  put(bodyId: string, chunks: readonly Buffer[], sends = 1): void {
    const heldUntil = this.now() + this.limits.holdMs;
    const present = this.held.get(bodyId) ?? this.loose.get(bodyId);
    if (present) {
      // Kept already: the new sends hold it too, for a new term (not one whose read is in progress).
      if (present.reading) return;
      this.unkeep(bodyId, present);
      this.keep(bodyId, { ...present, awaited: present.awaited + sends, heldUntil });
      return;
    }
    const bytes = byteLength(chunks);
    if (bytes > this.limits.bodyBytes || !this.makeRoom(bytes)) return;
    this.keep(bodyId, { body: Promise.resolve(chunks), reading: false, bytes, awaited: sends, heldUntil });
  }

  /** One announced send of the body is done (sent, or not to be sent): it holds the body no more. */
  release(bodyId: string): void {
    const entry = this.held.get(bodyId);
    if (!entry) return;
    entry.awaited -= 1;
    if (entry.awaited === 0) this.loosen(bodyId, entry);
  }

  /** Puts an entry in at the end of its map: held while sends are awaited, loose otherwise. */
  private keep(bodyId: string, entry: Kept): void {
    if (entry.awaited > 0) {
      this.held.set(bodyId, entry);
      this.heldBytes += entry.bytes;
    } else {
      this.loose.set(bodyId, entry);
      this.looseBytes += entry.bytes;
    }
  }

  private unkeep(bodyId: string, entry: Kept): void {
    if (this.held.delete(bodyId)) this.heldBytes -= entry.bytes;
    else if (this.loose.delete(bodyId)) this.looseBytes -= entry.bytes;
  }

  private loosen(bodyId: string, entry: Kept): void {
    this.unkeep(bodyId, entry);
    this.keep(bodyId, { ...entry, awaited: 0 });
  }

  /** Holds whose time is over end, oldest first: their bodies become droppable. */
  private endHolds(): void {
    const now = this.now();
    for (const [bodyId, entry] of this.held) {
      if (entry.heldUntil > now) return;
      this.loosen(bodyId, entry);
    }
  }

  /**
   * Makes room for `incoming` more bytes by dropping bodies not held, least recently used first;
   * drops nothing and answers false when that cannot make room.
   */
  private makeRoom(incoming: number): boolean {
    this.endHolds();
    const over = this.heldBytes + this.looseBytes + incoming - this.limits.totalBytes;
    if (over <= 0) return true;
    if (this.looseBytes < over) return false;
    let freed = 0;
    for (const [id, entry] of this.loose) {
      if (freed >= over) break;
      // Dropping a read in progress would free nothing and lose the shared read.
      if (entry.reading) continue;
      this.loose.delete(id);
      this.looseBytes -= entry.bytes;
      freed += entry.bytes;
    }
    return true;
  }

  private async readAll(bodyId: string): Promise<readonly Buffer[]> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.read(bodyId)) chunks.push(chunk);
    return chunks;
  }
}

function byteLength(chunks: readonly Buffer[]): number {
  let bytes = 0;
  for (const chunk of chunks) bytes += chunk.length;
  return bytes;
}
