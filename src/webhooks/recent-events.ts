import type { EventRecord } from '../store/records.ts';

/** Events kept: a few seconds of a busy server's fan-out, a few MB. */
const DEFAULT_LIMIT = 5_000;

/**
 * The events the fan-out has just turned into delivery jobs, kept in memory so that building
 * those jobs' request bodies, moments later, does not read each event back from the store.
 * Events never change once stored, so a kept copy is never stale; the oldest go first.
 */
export class RecentEvents {
  private readonly kept = new Map<string, EventRecord>();

  constructor(private readonly limit = DEFAULT_LIMIT) {}

  add(event: EventRecord): void {
    if (this.kept.has(event.id)) return;
    this.kept.set(event.id, event);
    if (this.kept.size > this.limit) this.kept.delete(this.kept.keys().next().value!);
  }

  get(id: string): EventRecord | undefined {
    return this.kept.get(id);
  }
}
