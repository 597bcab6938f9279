import type { JobKindName } from '../store/job-index.ts';
import type { Claim } from './claim.ts';
import type { DispatcherLimits } from './job-kind.ts';

/** What is in memory now, for the operator. */
export interface QueueSnapshot {
  running: number;
  ready: number;
  destinations: Array<{ destination: string; ready: number; running: number }>;
  nextWakeAt: number | null;
}

/** One dispatcher's memory (SMTP or HTTP): ready queues per destination and what runs. */
export class ReadyQueues {
  /** Per destination, its jobs in the order they start; a destination's turn moves it to the back. */
  readonly ready = new Map<string, Claim[]>();
  /** Per destination, its jobs handed to their kind and not released. */
  readonly runningPer = new Map<string, number>();
  readonly kindsPer = new Map<string, Set<JobKindName>>();
  /** Per destination, how many of its jobs handed over count against the total (`running`). */
  private readonly countedPer = new Map<string, number>();
  readyCount = 0;
  /** Jobs in a transaction: what the limits count. */
  running = 0;
  /** Whether a kind of this dispatcher hands jobs over ahead (JobKind.handOff). */
  handsOff = false;
  constructor(readonly limits: DispatcherLimits) {}

  /** Puts a job at the end of its destination's queue. */
  push(claim: Claim, destination: string): void {
    const list = this.ready.get(destination) ?? [];
    list.push(claim);
    this.ready.set(destination, list);
    this.readyCount += 1;
    const kinds = this.kindsPer.get(destination) ?? new Set();
    kinds.add(claim.kind.name);
    this.kindsPer.set(destination, kinds);
  }

  /** Takes every ready job of the destination out. */
  takeAll(destination: string): Claim[] | undefined {
    const items = this.ready.get(destination);
    if (!items) return undefined;
    this.ready.delete(destination);
    this.readyCount -= items.length;
    return items;
  }

  /** Takes the ready jobs of the destination out whose kind can park them (JobKind.setAside); the others stay. */
  takeParkable(destination: string): Claim[] {
    const items = this.ready.get(destination);
    if (!items) return [];
    // eslint-disable-next-line @typescript-eslint/unbound-method -- asks whether the kind has the method, never calls it
    const parkable = items.filter((item) => item.kind.setAside);
    if (parkable.length === 0) return parkable;
    const kept = items.filter((item) => !item.kind.setAside);
    if (kept.length > 0) this.ready.set(destination, kept);
    else this.ready.delete(destination);
    this.readyCount -= parkable.length;
    return parkable;
  }

  /** Takes every ready job out (the engine stops). */
  clear(): Claim[] {
    const items = [...this.ready.values()].flat();
    this.ready.clear();
    this.readyCount = 0;
    return items;
  }

  /** A job of the destination goes to its kind; within the destination's concurrency it counts against the total. */
  start(destination: string, concurrency: number): void {
    const handed = (this.runningPer.get(destination) ?? 0) + 1;
    this.runningPer.set(destination, handed);
    this.count(destination, handed, concurrency);
  }

  /** A job of the destination no longer uses a connection. */
  release(destination: string, concurrency: number): void {
    const left = (this.runningPer.get(destination) ?? 1) - 1;
    this.count(destination, left, concurrency);
    if (left === 0) {
      this.runningPer.delete(destination);
      if (!this.ready.has(destination)) this.kindsPer.delete(destination);
    } else this.runningPer.set(destination, left);
  }

  /**
   * What the destination's jobs count against the total: those within its concurrency. Set, not
   * added to, so that a concurrency that changed while jobs ran (shaping) leaves no count behind.
   */
  private count(destination: string, handed: number, concurrency: number): void {
    const counted = Math.min(handed, concurrency);
    this.running += counted - (this.countedPer.get(destination) ?? 0);
    if (counted === 0) this.countedPer.delete(destination);
    else this.countedPer.set(destination, counted);
  }

  /** The destinations with jobs ready or running. */
  names(): Set<string> {
    return new Set([...this.ready.keys(), ...this.runningPer.keys()]);
  }

  /** The figures of the operator's queue view. */
  snapshot(nextWakeAt: number | null): QueueSnapshot {
    return {
      running: this.running,
      ready: this.readyCount,
      destinations: [...this.names()].map((destination) => ({
        destination,
        ready: this.ready.get(destination)?.length ?? 0,
        running: this.runningPer.get(destination) ?? 0,
      })),
      nextWakeAt,
    };
  }
}
