import type { JobKindName } from '../store/job-index.ts';

export type DispatcherName = 'smtp' | 'http';

/**
 * A kind of job: which dispatcher runs it, how its record is read, where it goes (the
 * destination whose limits apply) and what one attempt is. The attempt writes its outcome (new
 * state, next due entry, events) in one batch, through its kind (`queue/outcomes.ts`, `queue/http-jobs.ts`).
 */
export interface JobKind<J = unknown> {
  readonly name: JobKindName;
  readonly dispatcher: DispatcherName;
  /** The job's record (`key`: its entry), or null when there is nothing to do (gone, or final): its entry is dropped. */
  load(id: string, key: string): Promise<J | null>;
  /** Optional: several records at once (in the order asked, with their entries' keys), cheaper than a load each. */
  loadMany?(ids: readonly string[], keys: readonly string[]): Promise<Array<J | null>>;
  /**
   * Optional: completes jobs read that go into a ready queue (reads what their attempt needs,
   * e.g. request bodies), once their destination is known to have room: jobs left on the index
   * or set aside are not completed. A job it cannot complete is run all the same (the attempt
   * reads what is missing).
   */
  prepare?(jobs: J[]): Promise<void>;
  /** When the record says the job is due; an entry at another time is stale and skipped. */
  dueMs(job: J): number;
  /**
   * The destination whose limits apply: an MX set for SMTP, a URL origin for HTTP. A lookup that
   * fails is logged and the job is read again after a short back-off (dispatcher.ts, LOOKUP_RETRY_MS).
   */
  destination(job: J): Promise<string>;
  /**
   * One attempt and its outcome. `release` frees the slot once no connection is used any more.
   * 'withdrawn': no attempt was made and nothing written (see `withdraw`); the job is read again.
   * `destination` is the one it was filed under (for its log lines).
   */
  run(job: J, release: () => void, destination: string): Promise<void | 'withdrawn'>;
  /**
   * Optional: takes due jobs of a destination that is paused as down off the due-time index
   * (parks them in the store) so they are not read again and again while it is down. Without
   * it they are set aside in memory until the pause ends.
   */
  setAside?(jobs: J[], destination: string): Promise<void>;
  /**
   * Optional: jobs of this kind handed to the dispatcher at once per destination, as a multiple
   * of the destination's concurrency (default 1: the engine starts each job itself). Above 1 the
   * dispatcher keeps at most `concurrency` of them going and starts the next as soon as one
   * ends (the HTTP client queues requests per origin), so the destination's connections do not
   * wait for a turn of the engine while outcomes are written. Of a destination's jobs handed
   * over, the dispatcher's total `concurrency` counts those that can be under way (at most the
   * destination's concurrency); the others wait for the destination's own slots.
   */
  readonly handOff?: number;
  /**
   * With handOff: the jobs handed to the dispatcher for the destination that have not started
   * end at once, their run resolving 'withdrawn'. Asked when the destination is suspended or
   * paused as down, so that no more of them start.
   */
  withdraw?(destination: string): void;
}

export interface DispatcherLimits {
  /** Jobs in flight at once, in total for the dispatcher. */
  concurrency: number;
  /** Jobs in flight at once per destination, unless the destination has its own. */
  perDestination: number;
  /** Jobs held in memory (ready + in flight); the rest wait in the store. */
  readyLimit: number;
  /**
   * Ready jobs one destination may hold (default: no cap). Past it the destination's further due
   * jobs are left on the index until its queue has drained by half, so one slow destination
   * cannot fill the memory that the others' jobs need.
   */
  perDestinationReady?: number;
}

/** Limits the operator set for one destination (`delivery.destinations`). */
export interface DestinationLimits {
  concurrency?: number | undefined;
  /** Jobs started per second at most. */
  rate?: number | undefined;
}
