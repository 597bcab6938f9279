import type { Logger } from 'pino';
import { after, fromTime, startOf, type JobIndex, type JobKindName } from '../store/job-index.ts';
import type { Claim, Ending, Fill, Placer, Visit } from './claim.ts';
import type { DispatcherLimits, DispatcherName, JobKind } from './job-kind.ts';
import { splitLane } from './lane.ts';

/** Records read from the store at once while filling the ready queues. */
const READ_AHEAD = 32;
/** Index entries read at once while filling the ready queues: at most, and at least. */
const PAGE = 512;
const MIN_PAGE = 16;
/**
 * Each kind's index is read again from its start at least this often (ms) while the engine reads
 * it, whatever its floor says: an entry that landed without the engine being told (every writer
 * tells it; this is the safety net) is taken within this time.
 */
const FULL_READ_MS = 5000;

export interface ReaderOptions {
  dispatchers: Record<DispatcherName, DispatcherLimits>;
  /** How often each kind's index is read from its start at least (ms; default 5 s; tests). */
  fullReadMs?: number | undefined;
}

/** Per dispatcher: how many jobs are taken, and whether more was due than fitted. */
interface Taken {
  /** Jobs taken and not finished (ready, running or recording an outcome). */
  count: number;
  /** More was due than fitted: read again when there is room. */
  backlog: boolean;
}

/**
 * The engine's reading half: reads the due-time index (store/job-index.ts) of every kind and
 * hands the due jobs it takes (its claims) to the dispatcher, as far as there is room. It keeps
 * what a read needs so as not to read the same entries again and again: where each kind's next
 * read begins (its floor), the entries before a floor to read again by key, the jobs let go
 * (held destinations, capped, waiting for a destination lookup), and what changed while a read
 * ran (jobs done, floors lowered), so that a read does not step past it.
 */
export class IndexReader {
  private readonly taken = new Set<string>();
  private readonly counts: Record<DispatcherName, Taken> = { smtp: { count: 0, backlog: false }, http: { count: 0, backlog: false } };
  /** Taken jobs of suspended destinations are let go and not read again until resumed. */
  private readonly skipped = new Map<string, string>();
  /**
   * Due jobs left on the index because their destination holds its share of ready memory, by
   * destination (ref → entry, with the job as read: released, it is not read again).
   */
  private readonly capped = new Map<string, Map<string, Visit>>();
  /** The same, by job: which destination's share each waits for. */
  private readonly cappedRefs = new Map<string, string>();
  /** Destinations whose released jobs the next read has not taken yet. */
  private readonly uncapping = new Set<string>();
  /** Jobs whose destination could not be looked up, with when to read them again (their entries stay). */
  private readonly retries = new Map<string, number>();
  /**
   * Jobs whose outcome landed while the index was being read and its entries taken: the read
   * may still hold their entries, which are not loaded again (their record is gone or moved on).
   */
  private doneDuringFill: Set<string> | null = null;
  /**
   * Per kind, where the next read of the index begins (absent: at the kind's start). Every
   * entry before it is known here (taken, skipped, left capped, waiting for a lookup) or gone,
   * so a fill does not read past the jobs in memory again and again. An entry put before it
   * moves it back (`notify`, `lower`); one of those known let go while its entry stays is read
   * again by key (`revisit`); and now and then every kind is read from its start (`reread`).
   */
  private readonly floors = new Map<JobKindName, string>();
  /**
   * Entries before a floor that are known to be on the index and no longer held (released from
   * their cap, withdrawn, failed): the next fill reads them by key, not by reading the index again.
   */
  private readonly revisits = new Map<JobKindName, Map<string, Visit>>();
  /** Lowered while a fill of the kind was reading: where the fill's floor may go at most. */
  private readonly loweredDuringFill = new Map<JobKindName, string>();
  private fillingKind: JobKindName | null = null;
  private lastFullRead = 0;
  private stopped = true;

  constructor(
    private readonly index: JobIndex,
    private readonly kinds: ReadonlyMap<JobKindName, JobKind>,
    private readonly options: ReaderOptions,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.stopped = false;
    this.reread();
  }

  stop(): void {
    this.stopped = true;
  }

  /** A job became due at `dueMs`, its entry written: the next read of each kind begins there or before. */
  notify(dueMs: number): void {
    for (const kind of this.kinds.keys()) this.lower(kind, fromTime(kind, dueMs));
  }

  /** The next read of every kind's index begins at its start. */
  reread(): void {
    this.floors.clear();
    this.revisits.clear();
    if (this.fillingKind !== null) this.loweredDuringFill.set(this.fillingKind, startOf(this.fillingKind));
    this.lastFullRead = performance.now();
  }

  /**
   * Takes what is due now of every kind into the ready queues (`to`), as far as there is room.
   * `again`: read again at once; `next`: when the earliest entry not due yet comes due.
   */
  async read(now: number, to: Placer): Promise<{ again: boolean; next: number | null }> {
    if (performance.now() - this.lastFullRead >= (this.options.fullReadMs ?? FULL_READ_MS)) this.reread();
    this.endRetries(now);
    let again = false;
    let next: number | null = null;
    for (const kind of this.kinds.values()) {
      if (await this.fill(kind, now, to)) again = true;
      const due = await this.index.nextDue(kind.name, now);
      if (due !== null && (next === null || due < next)) next = due;
    }
    for (const at of this.retries.values()) if (next === null || at < next) next = at;
    return { again, next };
  }

  /** Whether the job is in memory (ready or in flight): its outcome is pending. */
  holds(kind: JobKindName, id: string): boolean {
    return this.taken.has(`${kind}:${id}`);
  }

  /** Lets a taken job go without running it (its entry stays on the index). */
  letGo(claim: Claim): void {
    if (this.taken.delete(claim.ref)) this.counts[claim.kind.dispatcher].count -= 1;
  }

  /** The job, let go, is not read again until its destination is no longer held (`unskip`). */
  skip(claim: Claim, destination: string): void {
    this.skipped.set(claim.ref, destination);
  }

  /** The jobs of the destination let go while it was held are read again. */
  unskip(destination: string): void {
    let any = false;
    for (const [ref, dest] of this.skipped) {
      // A destination resumed frees its lanes too (queue/lane.ts).
      if (dest !== destination && splitLane(dest).destination !== destination) continue;
      this.skipped.delete(ref);
      any = true;
    }
    if (any) this.reread();
  }

  /** The job's destination could not be looked up: let go, and not read again before `atMs`. */
  retryLater(claim: Claim, atMs: number): void {
    this.letGo(claim);
    this.retries.set(claim.ref, atMs);
  }

  /**
   * The job, let go, waits on the index for room in its destination's share of ready memory,
   * remembered up to `bound` jobs in all. False when that many are: it is not remembered.
   */
  cap(destination: string, claim: Claim, bound: number): boolean {
    if (this.cappedRefs.size >= bound) return false;
    if (this.cappedRefs.has(claim.ref)) return true;
    const refs = this.capped.get(destination) ?? new Map<string, Visit>();
    refs.set(claim.ref, { entry: claim.entry, job: claim.job });
    this.capped.set(destination, refs);
    this.cappedRefs.set(claim.ref, destination);
    return true;
  }

  /**
   * The destination's queue has room again: as many of its jobs left on the index as it has
   * room for are read again, the earliest first (the others stay left, and are not read again
   * until there is room for them: a backlog of one destination is read once, not once per turn).
   * True when the index is to be read now.
   */
  uncap(destination: string, room: number): boolean {
    const refs = this.capped.get(destination);
    if (!refs || this.uncapping.has(destination)) return false;
    let released = 0;
    for (const [ref, visit] of refs) {
      if (released >= room) break;
      refs.delete(ref);
      this.cappedRefs.delete(ref);
      this.revisit(visit);
      released += 1;
    }
    if (refs.size === 0) this.capped.delete(destination);
    // Until the next read has taken them, released jobs are not counted as room again.
    this.uncapping.add(destination);
    return true;
  }

  /**
   * A job handed to its kind has ended, and is let go. Withdrawn (not attempted) or failed
   * (perhaps no outcome written), its entry is still on the index: read again. True when the
   * index is to be read now: a withdrawn job is still due, and room was freed for a backlog.
   */
  end(claim: Claim, how: Ending): boolean {
    this.letGo(claim);
    if (how !== 'done') this.revisit({ entry: claim.entry });
    if (how !== 'withdrawn') this.doneDuringFill?.add(claim.ref);
    const taken = this.counts[claim.kind.dispatcher];
    return how === 'withdrawn' || (taken.backlog && taken.count < this.options.dispatchers[claim.kind.dispatcher].readyLimit / 2);
  }

  /** The next read of the kind's index begins at `from` or before. */
  private lower(kind: JobKindName, from: string): void {
    const floor = this.floors.get(kind);
    if (floor !== undefined && from < floor) this.floors.set(kind, from);
    if (this.fillingKind === kind) {
      const lowered = this.loweredDuringFill.get(kind);
      if (lowered === undefined || from < lowered) this.loweredDuringFill.set(kind, from);
    }
  }

  /** The entry is on the index and held no more: the next fill takes it again (its job read again unless given). */
  private revisit(visit: Visit): void {
    let visits = this.revisits.get(visit.entry.kind);
    if (!visits) this.revisits.set(visit.entry.kind, (visits = new Map<string, Visit>()));
    visits.set(visit.entry.key, visit);
  }

  /** Waits for a destination lookup that are over: their jobs are read again (from the start: their entries may have moved). */
  private endRetries(now: number): void {
    if (this.retries.size === 0) return;
    let any = false;
    for (const [ref, at] of this.retries) {
      if (at > now) continue;
      this.retries.delete(ref);
      any = true;
    }
    if (any) this.reread();
  }

  /** Takes due jobs of one kind into its dispatcher's ready queues, as far as there is room. True: read again. */
  private async fill(kind: JobKind, now: number, to: Placer): Promise<boolean> {
    const taken = this.counts[kind.dispatcher];
    const room = this.options.dispatchers[kind.dispatcher].readyLimit - taken.count;
    if (room <= 0) {
      taken.backlog = true;
      return false;
    }
    // Taken and suspended jobs are still on the index: read past them.
    // What was released before this read is read now.
    this.uncapping.clear();
    const fill: Fill = { kind, now, room, done: new Set<string>(), to, fresh: 0, stop: false, again: false };
    this.doneDuringFill = fill.done;
    this.fillingKind = kind.name;
    this.loweredDuringFill.delete(kind.name);
    const from = this.floors.get(kind.name) ?? startOf(kind.name);
    let floor = from;
    try {
      floor = await this.fillFrom(fill, from);
    } finally {
      this.doneDuringFill = null;
      this.fillingKind = null;
      const lowered = this.loweredDuringFill.get(kind.name);
      this.loweredDuringFill.delete(kind.name);
      if (lowered !== undefined && lowered < floor) floor = lowered;
      if (floor <= startOf(kind.name)) this.floors.delete(kind.name);
      else this.floors.set(kind.name, floor);
    }
    return fill.again;
  }

  /**
   * Takes what there is room for: first the entries to revisit, then the kind's due entries from
   * `from` on, page by page. Returns the new floor: the first entry read that is neither known
   * here nor gone (left on the index unremembered, or not reached), else past the last one read.
   */
  private async fillFrom(fill: Fill, from: string): Promise<string> {
    const { kind, now, room } = fill;
    const revisit = this.revisits.get(kind.name);
    if (revisit && revisit.size > 0) {
      const visits = [...revisit.values()].filter((v) => v.entry.dueMs <= now).sort(byKey);
      for (const v of visits) revisit.delete(v.entry.key);
      for (const v of await this.takeEntries(fill, visits)) this.revisit(v);
    }
    let floor = from;
    while (!fill.stop && fill.fresh < room && !this.stopped) {
      // No more than there is room for (and some over, for entries known here): with a backlog
      // behind a full ready queue, each read takes the few freed slots' worth, not a full page.
      const limit = Math.min(PAGE, Math.max(MIN_PAGE, 2 * (room - fill.fresh)));
      const page = await this.index.due(kind.name, now, limit, floor);
      if (page.length === 0) break;
      const [left] = await this.takeEntries(
        fill,
        page.map((entry) => ({ entry })),
      );
      if (left) {
        floor = left.entry.key;
        break;
      }
      floor = after(page[page.length - 1]!.key);
      if (page.length < limit) break;
    }
    this.counts[kind.dispatcher].backlog = fill.fresh >= room;
    return floor;
  }

  /**
   * Takes the jobs of these entries (in key order) and hands them to the dispatcher, as far as
   * there is room; returns the entries not dealt with (left on the index unremembered, or not
   * reached), in key order. `fill.stop`: nothing more can be taken until a destination drains.
   */
  private async takeEntries(fill: Fill, all: Visit[]): Promise<Visit[]> {
    const { kind, now, room, done } = fill;
    const taken = this.counts[kind.dispatcher];
    const entries = all.filter(({ entry }) => {
      const ref = `${kind.name}:${entry.id}`;
      return !this.taken.has(ref) && !this.skipped.has(ref) && !this.cappedRefs.has(ref) && !this.retries.has(ref) && !done.has(ref);
    });
    const left: Visit[] = [];
    // Read a few records at once and start what can start after each read: the first attempts
    // do not wait for the whole batch, and the reads overlap in the thread pool.
    let at = 0;
    while (at < entries.length && fill.fresh < room && !this.stopped && !fill.stop) {
      const slice = entries.slice(at, at + Math.min(READ_AHEAD, room - fill.fresh));
      at += slice.length;
      const jobs = await this.load(kind, slice);
      const found: Claim[] = [];
      for (const [i, visit] of slice.entries()) {
        const job = jobs[i];
        const entry = visit.entry;
        const ref = `${kind.name}:${entry.id}`;
        if (this.stopped) {
          left.push(visit);
          continue;
        }
        if (this.taken.has(ref) || done.has(ref)) continue;
        if (job === null || job === undefined) {
          // Nothing to do (purged, or finished by a change that raced this read): the entry goes.
          this.log.debug({ kind: kind.name, id: entry.id }, 'dropping a due-time entry with nothing to do');
          await this.index.drop(entry.key);
          continue;
        }
        // Its outcome moved it on since the index was read: not due any more.
        if (kind.dueMs(job) > now) continue;
        this.taken.add(ref);
        taken.count += 1;
        found.push({ kind, job, ref, entry });
        fill.fresh += 1;
      }
      const past = await fill.to.place(fill, found);
      if (past) left.push(...past);
    }
    left.push(...entries.slice(at));
    return left.sort(byKey);
  }

  /** The jobs of these entries: those not read yet in one read (loadMany) or a read each. */
  private async load(kind: JobKind, visits: Visit[]): Promise<unknown[]> {
    const unread = visits.filter((v) => v.job === undefined).map((v) => v.entry);
    if (unread.length === 0) return visits.map((v) => v.job);
    const read = kind.loadMany
      ? await kind.loadMany(
          unread.map((e) => e.id),
          unread.map((e) => e.key),
        )
      : await Promise.all(unread.map((e) => kind.load(e.id, e.key)));
    let next = 0;
    return visits.map((v) => (v.job === undefined ? read[next++] : v.job));
  }
}

function byKey(a: Visit, b: Visit): number {
  return a.entry.key < b.entry.key ? -1 : 1;
}
