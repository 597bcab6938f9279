import type { DueEntry } from '../store/job-index.ts';
import type { JobKind } from './job-kind.ts';

/*
 * What the engine's two halves pass each other: the index reader (queue/index-reader.ts) takes
 * due jobs off the index, one read of a kind at a time, and hands them to the dispatcher
 * (queue/dispatcher.ts) as claims.
 */

/** An entry to take, with its job when that is already read (left capped, it was). */
export interface Visit {
  entry: DueEntry;
  job?: unknown;
}

/** A due job taken into memory. Its entry stays on the index until its outcome moves it: the lease. */
export interface Claim {
  kind: JobKind;
  job: unknown;
  /** `<kind>:<id>`. */
  ref: string;
  /** Its entry on the index. */
  entry: DueEntry;
}

/** How a job handed to its kind ended (see JobKind.run). */
export type Ending = 'done' | 'withdrawn' | 'failed';

/** What a read hands the jobs it takes to: the dispatcher (queue/dispatcher.ts). */
export interface Placer {
  /**
   * Files the jobs under their destinations, as far as each has room. Returns the entries it
   * left on the index without their being remembered by the reader (read past), or null.
   */
  place(fill: Fill, claims: Claim[]): Promise<Visit[] | null>;
}

/** One read of one kind's index into its dispatcher's ready queues. */
export interface Fill {
  readonly kind: JobKind;
  readonly now: number;
  /** Jobs the read may take: its dispatcher's ready limit less those taken. */
  readonly room: number;
  /** Jobs whose outcome landed during the read (see IndexReader.doneDuringFill). */
  readonly done: Set<string>;
  readonly to: Placer;
  /** Jobs the read took and still holds. */
  fresh: number;
  /** Nothing more can be taken until a destination drains. */
  stop: boolean;
  /** Read again once this read is over (what was left or parked freed no room). */
  again: boolean;
}
