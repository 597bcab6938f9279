import type { Logger } from 'pino';
import { StoreClosedError } from '../store/store.ts';
import { outcomeRetryDelayMs } from './retry-policy.ts';

/**
 * Writes an attempt's outcome, again and again (with back-off) while the store refuses it. The
 * attempt was made (the mail perhaps delivered, the POST perhaps answered 2xx): until its
 * outcome is on disk its job stays taken by the engine (its lease, in memory), so no other
 * attempt starts for it. Only a stop gives up (the store closed, or giveUp): the job may then
 * be attempted again after the restart, the at-least-once window of a crash.
 */
export class OutcomeWriter {
  private givingUp = false;
  private readonly waiting = new Set<() => void>();

  /** `write` is the whole outcome (reads included): it runs again as it is on each try. */
  async write<T>(write: () => Promise<T>, log: () => Logger, what: Record<string, unknown>): Promise<T> {
    for (let failures = 1; ; failures++) {
      try {
        const done = await write();
        if (failures > 1) log().info({ ...what, tries: failures }, 'the outcome of an attempt is stored');
        return done;
      } catch (err) {
        if (err instanceof StoreClosedError) throw err;
        if (this.givingUp) {
          log().error({ err, ...what }, 'stopping with the outcome of an attempt not stored: it may be attempted again after the restart');
          throw err;
        }
        const delay = outcomeRetryDelayMs(failures);
        // One line per job, not one per try.
        if (failures === 1)
          log().error(
            { err, ...what, retry_in_ms: delay },
            'the outcome of an attempt could not be stored: kept in memory and written again; no new attempt for this job',
          );
        await this.wait(delay);
      }
    }
  }

  /** Outcomes still refused end now (a stop). */
  giveUp(): void {
    this.givingUp = true;
    for (const wake of this.waiting) wake();
  }

  private wait(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.waiting.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.waiting.add(wake);
    });
  }
}
