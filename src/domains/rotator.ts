import type { DomainsRepo } from '../store/domains-repo.ts';
import type { DomainRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import { notFound } from '../util/errors.ts';
import { DnsUnavailableError } from './resolver.ts';
import type { KeyedMutex } from '../util/keyed-mutex.ts';
import { iso, type Clock } from '../util/time.ts';
import type { DkimKeyStore } from './dkim-keys.ts';
import type { DnsChecker } from './dns-checker.ts';
import { DAY, expiredRetired, rotationDecision, type RotationDecision } from './rotation.ts';
import { newSelector, newSlot, removeSlot } from './slots.ts';

export interface RotationOutcome {
  domain: DomainRecord;
  decision: RotationDecision;
}

/**
 * DKIM key rotation: the standby key takes over once its record is published and the interval
 * has passed; the old key stays published (not required) for a grace period, then goes.
 */
export class Rotator {
  constructor(
    private readonly store: Store,
    private readonly repo: DomainsRepo,
    private readonly keys: DkimKeyStore,
    private readonly checker: DnsChecker,
    private readonly mutex: KeyedMutex,
    private readonly clock: Clock,
    private readonly options: { ed25519: boolean; retiredGraceDays: number },
  ) {}

  /**
   * Checks DNS, then rotates if due (or, with `force`, if only the standby is published).
   * Without a standby, `force` creates one so that it can be published first.
   */
  async rotate(domain: DomainRecord, force = false): Promise<RotationOutcome> {
    // DNS unanswered: decide on what the last check found (a rotation needs the standby published).
    const checked =
      (await this.checker.check(domain).catch((err: unknown) => {
        if (err instanceof DnsUnavailableError) return null;
        throw err;
      })) ?? domain;
    return this.mutex.run(`domain:${domain.id}`, async () => {
      const current = await this.repo.get(domain.id);
      // Deleted meanwhile: writing it back would resurrect it without its key files.
      if (!current) throw notFound(`domain ${checked.name} not found`);
      const now = this.clock.now();
      const decision = rotationDecision(current, now, force);
      if (decision.kind === 'no_standby' && force) {
        const next = { ...current, dkim: { ...current.dkim, standby: await this.slot(current, now) }, updatedAt: iso(now) };
        await this.store.commit(this.repo.put(next, current));
        return { domain: next, decision };
      }
      if (decision.kind !== 'rotate') return { domain: current, decision };
      const standby = current.dkim.standby!;
      const next: DomainRecord = {
        ...current,
        dkim: {
          active: { ...standby, activatedAt: iso(now), publishUntil: null },
          standby: current.dkimRotationIntervalDays === null && !force ? null : await this.slot(current, now),
          retired: [...current.dkim.retired, { ...current.dkim.active, publishUntil: iso(now + this.options.retiredGraceDays * DAY) }],
        },
        updatedAt: iso(now),
      };
      await this.store.commit(this.repo.put(next, current));
      return { domain: next, decision };
    });
  }

  /** The daily job: rotate what is due, drop retired keys past their grace period. */
  async runDaily(onError: (domain: DomainRecord, err: unknown) => void): Promise<{ rotated: number; purged: number }> {
    let rotated = 0;
    let purged = 0;
    for await (const domain of this.repo.all()) {
      try {
        if (domain.dkimRotationIntervalDays !== null) {
          if ((await this.rotate(domain)).decision.kind === 'rotate') rotated++;
        }
        purged += await this.purgeRetired(domain.id);
      } catch (err) {
        onError(domain, err);
      }
    }
    return { rotated, purged };
  }

  /** Removes retired slots whose grace period is over, and their key files. */
  async purgeRetired(domainId: string): Promise<number> {
    return this.mutex.run(`domain:${domainId}`, async () => {
      const current = await this.repo.get(domainId);
      if (!current) return 0;
      const expired = expiredRetired(current, this.clock.now());
      if (expired.length === 0) return 0;
      const next: DomainRecord = {
        ...current,
        dkim: { ...current.dkim, retired: current.dkim.retired.filter((s) => !expired.includes(s)) },
        dns: { ...current.dns, propagated: { ...current.dns.propagated } },
      };
      for (const slot of expired) for (const k of slot.keys) delete next.dns.propagated[`dkim:${k.selector}`];
      await this.store.commit(this.repo.put(next, current));
      for (const slot of expired) await removeSlot(this.keys, domainId, slot);
      return expired.length;
    });
  }

  private async slot(domain: DomainRecord, now: number) {
    return newSlot(this.keys, domain.id, newSelector(now), this.options.ed25519, iso(now));
  }
}
