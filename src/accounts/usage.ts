import type { AccountsRepo } from '../store/accounts-repo.ts';
import type { AccountRecord } from '../store/records.ts';
import { AppError } from '../util/errors.ts';
import { mapLimited } from '../util/limited.ts';
import type { Clock } from '../util/time.ts';

/** The operator's billing settings (`billing.*`): what one parent's pooled invoice amounts to each month. */
export interface BillingSettings {
  monthlyAmount: number;
  currency: string;
}

/** Receptions of one account in [fromMs, toMs): from the statistics counters. */
export type ReceptionCount = (accountId: string, fromMs: number, toMs: number) => Promise<number>;

export interface UsageBucket {
  accountId?: string;
  name?: string;
  receptions: number;
  /** In minor units (cents): the parts add up to the total exactly. */
  allocatedMinor: number;
}

export interface UsageReport {
  period: { start: number; end: number };
  currency: string;
  parent: UsageBucket;
  subAccounts: UsageBucket[];
  removed: UsageBucket;
  total: UsageBucket;
}

/** The billing period holding `ms`: its calendar month in UTC, [start, end). */
export function billingPeriod(ms: number): { start: number; end: number } {
  const d = new Date(ms);
  return { start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) };
}

/**
 * A parent's usage in the current billing period: receptions (outbound messages accepted, not
 * sandbox, as the statistics count them) of the parent, of each sub account not deleted
 * (suspended ones too: they received mail earlier in the period) and, together, of the sub
 * accounts deleted during the period. The monthly amount is allocated in proportion to
 * receptions, in minor units by largest remainder so the parts add up to the amount; with no
 * receptions at all it stays with the parent.
 */
export class Usage {
  constructor(
    private readonly repo: AccountsRepo,
    private readonly receptions: ReceptionCount,
    private readonly clock: Clock,
    private readonly settings: () => BillingSettings,
  ) {}

  async report(parent: AccountRecord): Promise<UsageReport> {
    const period = billingPeriod(this.clock.now());
    const { monthlyAmount, currency } = this.settings();
    const count = (id: string) => this.receptions(id, period.start, period.end);
    const children = (await Promise.all((await this.repo.allChildIds(parent.id)).map((id) => this.repo.getAccount(id))))
      .filter((a): a is AccountRecord => a !== undefined)
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    const live = children.filter((c) => c.status !== 'deleted');
    const removed = children.filter((c) => c.status === 'deleted' && c.deletedAt && Date.parse(c.deletedAt) >= period.start);
    // A few counter reads at a time: a parent may have thousands of sub accounts.
    const counts = await mapLimited([parent.id, ...live.map((c) => c.id), ...removed.map((c) => c.id)], 16, count);
    const own = counts[0]!;
    const liveCounts = counts.slice(1, 1 + live.length);
    const removedCounts = counts.slice(1 + live.length);
    const removedTotal = removedCounts.reduce((a, b) => a + b, 0);
    const volumes = [own, ...liveCounts, removedTotal];
    const amountMinor = Math.round(monthlyAmount * 100);
    const shares = allocate(amountMinor, volumes);
    const total = volumes.reduce((a, b) => a + b, 0);
    return {
      period,
      currency,
      parent: { accountId: parent.id, receptions: own, allocatedMinor: shares[0]! },
      subAccounts: live.map((c, i) => ({ accountId: c.id, name: c.name, receptions: liveCounts[i]!, allocatedMinor: shares[i + 1]! })),
      removed: { receptions: removedTotal, allocatedMinor: shares.at(-1)! },
      total: { receptions: total, allocatedMinor: amountMinor },
    };
  }
}

/**
 * Splits `amount` (whole minor units) in proportion to `volumes`: each part its floor, the rest
 * one unit each to the largest remainders (earlier parts first on a tie). No volume: all to the first part.
 */
export function allocate(amount: number, volumes: number[]): number[] {
  const total = volumes.reduce((a, b) => a + b, 0);
  if (total === 0) return volumes.map((_, i) => (i === 0 ? amount : 0));
  const exact = volumes.map((v) => (amount * v) / total);
  const parts = exact.map(Math.floor);
  let left = amount - parts.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, rest: x - Math.floor(x) })).sort((a, b) => b.rest - a.rest || a.i - b.i);
  for (const { i } of order) {
    if (left <= 0) break;
    parts[i]! += 1;
    left -= 1;
  }
  return parts;
}

/** 403 for a send past a sub account's monthly credit (v2 and v1 show the message; SMTP a 5.7.1 reply). */
export class CreditExhausted extends AppError {
  constructor(message: string) {
    super(403, message);
  }
}

interface Used {
  period: number;
  count: number;
}

/**
 * The monthly credit cap at acceptance. An account with a credit gets its period's receptions
 * counted in memory: read once from the counters, then kept up by every accept (reserved before
 * its batch commits, given back if the commit fails). A request whose messages would go past the
 * credit is refused whole. Sandbox mail and our own DSNs are not receptions and are not counted.
 */
export class CreditGate {
  private readonly used = new Map<string, Used>();
  private readonly loading = new Map<string, Promise<Used>>();

  constructor(
    private readonly receptions: ReceptionCount,
    private readonly clock: Clock,
  ) {}

  /**
   * Counts `n` receptions of the account (its record as the sender's request read it), or throws
   * CreditExhausted; returns the undo for a failed commit.
   */
  async reserve(account: AccountRecord, n: number): Promise<() => void> {
    if (n === 0) return () => undefined;
    const accountId = account.id;
    const credit = account.monthlyCredit ?? 0;
    const period = billingPeriod(this.clock.now());
    let used = this.used.get(accountId);
    if (used && used.period !== period.start) used = undefined;
    if (credit === 0) {
      // Uncapped: a count already kept stays right, should a cap be set again later.
      if (!used) return () => undefined;
    } else if (!used) {
      used = await this.load(accountId, period);
    }
    if (credit > 0 && used.count + n > credit) {
      const month = new Date(period.start).toISOString().slice(0, 7);
      throw new CreditExhausted(
        `monthly credit exhausted: this sub account has used ${used.count} of its ${credit} messages for ${month} (UTC), and this send has ${n}; sending resumes on ${new Date(period.end).toISOString()}`,
      );
    }
    const entry = used;
    entry.count += n;
    return () => {
      entry.count -= n;
    };
  }

  private async load(accountId: string, period: { start: number; end: number }): Promise<Used> {
    let pending = this.loading.get(accountId);
    if (!pending) {
      pending = (async () => {
        try {
          const entry = { period: period.start, count: await this.receptions(accountId, period.start, period.end) };
          this.used.set(accountId, entry);
          return entry;
        } finally {
          this.loading.delete(accountId);
        }
      })();
      this.loading.set(accountId, pending);
    }
    return pending;
  }
}
