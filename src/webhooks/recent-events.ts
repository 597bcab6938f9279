import type { EventRecord } from '../store/records.ts';
import { Handover } from '../util/handover.ts';

/** Events kept: a few seconds of a busy server's fan-out, some MB. */
const DEFAULT_LIMIT = 10_000;

/**
 * The events the fan-out has just turned into delivery jobs, kept in memory so that building
 * those jobs' request bodies, moments later, does not read each event back from the store. An
 * event is kept until each of its jobs has built its body once (a retry reads it back). Events
 * never change once stored, so a kept copy is never stale.
 */
export class RecentEvents {
  private readonly kept: Handover<EventRecord>;

  constructor(limit = DEFAULT_LIMIT) {
    this.kept = new Handover(limit);
  }

  /** Keeps the event for the first body of each of its `jobs`. */
  add(event: EventRecord, jobs = 1): void {
    this.kept.put(event.id, event, jobs);
  }

  /** The event, for one job's body. */
  take(id: string): EventRecord | undefined {
    return this.kept.take(id);
  }
}
