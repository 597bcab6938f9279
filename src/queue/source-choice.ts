import type { Logger } from 'pino';
import type { Messages } from '../message/messages.ts';
import { isFinal } from '../message/retention.ts';
import type { Pool, Source, SourceSet } from '../delivery/sources/sources.ts';
import { drawOf, pickByWeight } from '../delivery/sources/sources.ts';
import { nextDayMs } from '../delivery/sources/warmup.ts';
import type { WarmupCounter } from '../delivery/sources/warmup-counter.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { AccountRecord, MessageRecord } from '../store/records.ts';
import { iso, type Clock } from '../util/time.ts';
import { splitLane } from './lane.ts';

/** Whether a message may go out from its lane's source now, or until when it waits. */
export type Admission =
  | { source: Source }
  /** The lane has no source (none configured, or sandbox mail). */
  | { source: null }
  /** Over the cap, and another source of the pool has room: the job is filed again at once (the choice passes over sources at their caps). */
  | { refile: string }
  /** Every source of the pool is at its cap: not before the next day. */
  | { waitUntilMs: number; reason: string };

/**
 * Which source a message leaves from. Its pool: the one its account has in the store (`postilion
 * accounts pool`), else delivery.account_pools of the account, then the same of its parent
 * account (a sub account without a pool of its own sends from its parent's), else the default
 * pool. Within the pool, a source by weight among those under their warm-up cap, drawn the same
 * way for every read of one attempt (the lane stays put) and afresh for the next attempt.
 *
 * The cap is counted when the attempt starts (`admit`): a message filed under a source that
 * reached its cap meanwhile is not sent, but filed again, under another source of its pool that
 * has room (at once: nothing is written), or the next day (UTC) when none has. Never bounced.
 */
export class SourceChoice {
  /** Stored pool names no longer configured, warned about once. */
  private readonly warned = new Set<string>();

  constructor(
    private readonly set: SourceSet,
    private readonly counter: Pick<WarmupCounter, 'remaining' | 'take'>,
    private readonly accountPools: Readonly<Record<string, string>>,
    private readonly links: {
      account(id: string): Promise<AccountRecord | undefined>;
      messages: Pick<Messages, 'update'>;
      repo: Pick<MessagesRepo, 'schedule' | 'unschedule'>;
      clock: Clock;
      log: Logger;
    },
  ) {}

  /** The account's pool (see the class). */
  async poolOf(accountId: string): Promise<Pool> {
    const account = await this.links.account(accountId);
    const parent = account?.parentAccountId ? await this.links.account(account.parentAccountId) : undefined;
    for (const a of [account, parent]) {
      if (!a) continue;
      const stored = a.deliveryPool;
      if (stored && this.set.hasPool(stored)) return this.set.pool(stored);
      if (stored && !this.warned.has(`${a.id}:${stored}`)) {
        this.warned.add(`${a.id}:${stored}`);
        this.links.log.warn(
          { account_id: a.id, pool: stored },
          'the account names a delivery pool that delivery.pools does not have; its mail goes out from the next pool that applies',
        );
      }
      const configured = this.accountPools[a.id];
      if (configured) return this.set.pool(configured);
    }
    return this.set.pool(null);
  }

  /** The name of the source the message's next attempt goes out from. */
  async choose(message: MessageRecord): Promise<string> {
    const { members } = await this.poolOf(message.accountId);
    const usable = members.filter((m) => this.counter.remaining(m.source) > 0);
    // All at their caps: filed under one anyway; `admit` holds it back to the next day.
    return pickByWeight(usable.length > 0 ? usable : members, drawOf(message.id, message.attempts.length))!.source.name;
  }

  /** Counts the attempt against its lane's source, or says until when it waits (nothing counted). */
  async admit(message: MessageRecord, lane: string): Promise<Admission> {
    const name = splitLane(lane).source;
    const source = name ? this.set.get(name) : undefined;
    if (!source) return { source: null };
    if (this.counter.take(source)) return { source };
    const now = this.links.clock.now();
    const { members } = await this.poolOf(message.accountId);
    const other = members.some((m) => m.source !== source && this.counter.remaining(m.source) > 0);
    if (other) return { refile: `source ${source.name} reached its warm-up cap for today; filed again under another source of its pool` };
    return { waitUntilMs: nextDayMs(now), reason: 'every source of its pool reached its warm-up cap for today; waits for the next day (UTC)' };
  }

  /**
   * Moves the message taken as `taken` to `untilMs` on the due-time index, unattempted: no attempt
   * line, no event. Null when it moved on meanwhile.
   */
  postpone(taken: MessageRecord, untilMs: number): Promise<MessageRecord | null> {
    return this.links.messages.update(taken.id, (current, now) => {
      if (isFinal(current.status) || current.heldAt || current.dueAt !== taken.dueAt || current.status !== taken.status) return null;
      const next: MessageRecord = { ...current, dueAt: iso(Math.max(untilMs, now)), updatedAt: iso(now) };
      return { next, extra: [...this.links.repo.unschedule(current), ...this.links.repo.schedule(next)] };
    });
  }
}
