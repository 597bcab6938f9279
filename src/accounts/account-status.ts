import type { Accounts } from './accounts.ts';
import type { AccountsRepo } from '../store/accounts-repo.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { AccountRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { badRequest, conflict, forbidden, notFound } from '../util/errors.ts';
import { isPrintable } from '../util/text.ts';
import { iso, type Clock } from '../util/time.ts';
import type { Emitter } from '../util/signals.ts';

/** What AccountStatuses tells, after the change is on disk: the ids of the accounts that became active. */
export interface AccountSignals {
  'accounts.activated': string[];
}

/** Who suspends or unsuspends: a parent (its sub account, through the API) or the operator (any account, CLI). */
export type Actor = 'parent' | 'operator';

export const MAX_REASON = 500;

/**
 * The states of an account and their transitions (service-spec "Sub account status"):
 *
 *   active ──suspend──▶ suspended ──unsuspend──▶ active (or parent-suspended, while the parent is)
 *   active ──parent suspended──▶ parent-suspended ──parent unsuspended──▶ active
 *   any but deleted ──delete (sub accounts only)──▶ deleted
 *
 * A parent and its sub accounts change under one lock (Accounts.inFamily), and a cascade is one batch with the
 * parent's change. Only `active` sends and authenticates. Accounts that become active are
 * announced (their held mail is released: queue/held-mail.ts).
 */
export class AccountStatuses {
  constructor(
    private readonly store: Store,
    private readonly accounts: Accounts,
    private readonly repo: AccountsRepo,
    private readonly clock: Clock,
    private readonly signals: Emitter<AccountSignals>,
  ) {}

  async suspend(id: string, reason: string, by: Actor): Promise<AccountRecord> {
    const text = checkReason(reason);
    return this.change(id, async (account, now) => {
      if (account.status === 'deleted') throw conflict(`account ${id} is deleted`);
      if (account.status === 'suspended') throw conflict(`account ${id} is already suspended`);
      // Suspended with its parent: the operator may suspend it in its own right (it then stays
      // suspended when the parent comes back); a parent cannot reach it, being suspended itself.
      if (account.status === 'parent-suspended' && by === 'parent') throw conflict(`account ${id} is suspended with its parent account`);
      const next: AccountRecord = { ...account, status: 'suspended', suspension: { reason: text, at: iso(now), by }, updatedAt: iso(now) };
      const children = account.parentAccountId === null ? await this.children(id) : [];
      const cascaded = children.filter((c) => c.status === 'active').map((c): AccountRecord => ({ ...c, status: 'parent-suspended', updatedAt: iso(now) }));
      return { next, others: cascaded, activated: [] };
    });
  }

  async unsuspend(id: string, by: Actor): Promise<AccountRecord> {
    return this.change(id, async (account, now) => {
      if (account.status === 'deleted') throw conflict(`account ${id} is deleted`);
      if (account.status === 'parent-suspended') throw conflict(`account ${id} is suspended because its parent account is suspended: unsuspend the parent`);
      if (account.status !== 'suspended') throw conflict(`account ${id} is not suspended`);
      if (by === 'parent' && account.suspension?.by === 'operator')
        throw forbidden(`sub account ${id} was suspended by the operator of this server; only the operator can unsuspend it`);
      const parent = account.parentAccountId === null ? undefined : await this.repo.getAccount(account.parentAccountId);
      const status = parent && parent.status !== 'active' ? 'parent-suspended' : 'active';
      const next: AccountRecord = { ...account, status, suspension: null, updatedAt: iso(now) };
      const children = account.parentAccountId === null ? await this.children(id) : [];
      const back = children.filter((c) => c.status === 'parent-suspended').map((c): AccountRecord => ({ ...c, status: 'active', updatedAt: iso(now) }));
      return { next, others: back, activated: [...(status === 'active' ? [id] : []), ...back.map((c) => c.id)] };
    });
  }

  /** Soft delete of a sub account: kept with its data, refused everywhere, gone from its parent's list. */
  async delete(id: string): Promise<AccountRecord> {
    return this.change(id, async (account, now) => {
      if (account.parentAccountId === null) throw badRequest(`account ${id} is not a sub account; only sub accounts are deleted`);
      if (account.status === 'deleted') throw conflict(`sub account ${id} is already deleted`);
      const next: AccountRecord = { ...account, status: 'deleted', deletedAt: iso(now), updatedAt: iso(now) };
      return { next, others: [], activated: [] };
    });
  }

  private async change(
    id: string,
    decide: (account: AccountRecord, now: number) => Promise<{ next: AccountRecord; others: AccountRecord[]; activated: string[] }>,
  ): Promise<AccountRecord> {
    const { next, activated } = await this.accounts.inFamily(id, async () => {
      const account = await this.repo.getAccount(id);
      if (!account) throw notFound('account not found');
      const decided = await decide(account, this.clock.now());
      const ops: WriteOp[] = [decided.next, ...decided.others].flatMap((a) => this.repo.putAccount(a));
      await this.store.commit(ops);
      return decided;
    });
    if (activated.length > 0) this.signals.emit('accounts.activated', activated);
    return next;
  }

  private async children(parentId: string): Promise<AccountRecord[]> {
    const ids = await this.repo.allChildIds(parentId);
    const records = await Promise.all(ids.map((id) => this.repo.getAccount(id)));
    return records.filter((a): a is AccountRecord => a !== undefined);
  }
}

function checkReason(reason: string): string {
  const text = reason.trim();
  if (text.length === 0 || text.length > MAX_REASON) throw badRequest(`reason must be 1 to ${MAX_REASON} characters`);
  if (!isPrintable(text)) throw badRequest('reason must not contain control characters');
  return text;
}
