import { Lru } from '../util/lru.ts';

/** How an attempt at an HTTP job ended (the request was made, or the endpoint answered nothing). */
export type AttemptOutcome = 'delivered' | 'retry' | 'failed' | 'unreachable';

/** One request of a webhook delivery or a route POST, as the dashboard shows it. */
export interface HttpAttempt {
  job_id: string;
  kind: 'webhook' | 'route';
  target_id: string;
  account_id: string;
  /** The event a webhook delivery sent; a route POST's inbound message id. */
  event_id: string;
  at: string;
  /** The HTTP status; null when no answer came. */
  status: number | null;
  response_ms: number;
  error: string | null;
  outcome: AttemptOutcome;
  /** Failed attempts of the job after this one. */
  attempts: number;
}

/** Attempts kept per webhook or route, newest first. */
export const ATTEMPTS_PER_TARGET = 50;
/** Webhooks and routes whose attempts are kept (then the least recently used go). */
const TARGETS_KEPT = 2000;

/**
 * The last attempts of each webhook and route, in this process's memory: what the dashboard's
 * "recent deliveries" shows, with the status and the response time. A job that succeeds is
 * deleted from the store in its outcome's batch (store/jobs-repo.ts), so its request is known
 * only here; a restart begins an empty log. Bounded: 50 per target, 2000 targets.
 */
export class AttemptLog {
  private readonly byTarget: Lru<string, HttpAttempt[]>;

  constructor(
    private readonly perTarget = ATTEMPTS_PER_TARGET,
    targets = TARGETS_KEPT,
  ) {
    this.byTarget = new Lru(targets);
  }

  record(attempt: HttpAttempt): void {
    let list = this.byTarget.get(attempt.target_id);
    if (!list) {
      list = [];
      this.byTarget.set(attempt.target_id, list);
    }
    list.unshift(attempt);
    if (list.length > this.perTarget) list.length = this.perTarget;
  }

  /** The target's last attempts, newest first. */
  ofTarget(targetId: string): HttpAttempt[] {
    return [...(this.byTarget.get(targetId) ?? [])];
  }
}
