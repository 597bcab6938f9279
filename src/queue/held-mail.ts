import type { Logger } from 'pino';
import type { Messages } from '../message/messages.ts';
import { isFinal } from '../message/retention.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { AccountRecord, MessageRecord } from '../store/records.ts';
import { iso } from '../util/time.ts';

/** Held messages read and released at once while an account's mail is let go. */
const RELEASE_CHUNK = 64;

/**
 * Mail of an account that is not active (suspended, suspended with its parent, deleted) is held:
 * when it comes due it is taken off the due-time index and listed under its account, its record
 * unchanged but for `heldAt`. It is neither sent nor failed. When the account is active again
 * its held mail goes back on the index, due at once (or at its own later time).
 *
 * No lock is shared with the status change: a hold re-reads the account after it commits and
 * releases the message itself if the account became active meanwhile, so a release that walked
 * the list just before that hold landed cannot leave it behind.
 */
export class HeldMail {
  constructor(
    private readonly account: (id: string) => Promise<AccountRecord | undefined>,
    private readonly messages: Messages,
    private readonly repo: MessagesRepo,
    private readonly log: Logger,
    /** A released message is due at this time (the job engine is woken). */
    private readonly due: (dueMs: number) => void,
  ) {}

  /** Whether the message's account may send now. */
  async mayDeliver(message: MessageRecord): Promise<boolean> {
    return (await this.account(message.accountId))?.status === 'active';
  }

  /** Holds the message taken as `taken` (unless it moved on meanwhile). */
  async hold(taken: MessageRecord): Promise<void> {
    const held = await this.messages.update(taken.id, (current, now) => {
      if (current.heldAt || isFinal(current.status) || current.dueAt !== taken.dueAt) return null;
      const next: MessageRecord = { ...current, heldAt: iso(now), updatedAt: iso(now) };
      return { next, extra: this.repo.hold(current) };
    });
    if (!held) return;
    const account = await this.account(held.accountId);
    this.log.info({ message_id: held.id, account_id: held.accountId, account_status: account?.status ?? null }, 'account not active: message held');
    if (account?.status === 'active') await this.releaseOne(held.id);
  }

  /** Puts every held message of the accounts back on the due-time index; resolves with how many. */
  async release(accountIds: Iterable<string>): Promise<number> {
    let released = 0;
    for (const accountId of accountIds) {
      let n = 0;
      for (;;) {
        const ids = await this.repo.heldOf(accountId, RELEASE_CHUNK);
        if (ids.length === 0) break;
        const moved = await Promise.all(ids.map((id) => this.releaseOne(id, accountId)));
        n += moved.filter(Boolean).length;
      }
      if (n > 0) this.log.info({ account_id: accountId, messages: n }, 'account active again: held mail released');
      released += n;
    }
    return released;
  }

  /** At start: held mail of accounts made active while the daemon was down (the CLI on the store) goes back. */
  async releaseActive(): Promise<number> {
    const accounts = new Set<string>();
    for await (const [accountId] of this.repo.held()) accounts.add(accountId);
    const active: string[] = [];
    for (const id of accounts) if ((await this.account(id))?.status === 'active') active.push(id);
    return this.release(active);
  }

  /** Releases one message; an entry whose message is gone or no longer held is dropped. */
  private async releaseOne(id: string, accountId?: string): Promise<boolean> {
    let stale: MessageRecord | null = null;
    const released = await this.messages.update(id, (current, now) => {
      if (!current.heldAt) {
        stale = current;
        return null;
      }
      const next: MessageRecord = { ...current, heldAt: null, dueAt: current.dueAt > iso(now) ? current.dueAt : iso(now), updatedAt: iso(now) };
      return { next, extra: this.repo.unhold(current, isFinal(current.status) ? undefined : next) };
    });
    if (released) {
      this.due(Date.parse(released.dueAt));
      return true;
    }
    // Gone (or released already): its entry must not be read again.
    const owner = accountId ?? (stale as MessageRecord | null)?.accountId;
    if (owner) await this.repo.dropHeld(owner, id);
    return false;
  }
}
