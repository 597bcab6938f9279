import type { Next } from 'koa';
import type { IdempotencyRepo } from '../../store/idempotency-repo.ts';
import type { IdempotencyRecord } from '../../store/records.ts';
import { AppError, badRequest } from '../../util/errors.ts';
import { KeyedMutex } from '../../util/keyed-mutex.ts';
import type { SecretBox } from '../../util/secret-box.ts';
import type { Clock } from '../../util/time.ts';
import type { ApiContext } from '../context.ts';
import { decide, fingerprint, MAX_KEY_LENGTH, scopesDigest, settle, validKey, type Caller } from '../idempotency-policy.ts';
import { WriteConflictError } from '../../store/store.ts';

export interface IdempotencyTimes {
  lease_seconds: number;
  retention_hours: number;
  secret_retention_seconds: number;
}

/**
 * The Idempotency-Key state machine around one operation: claim the key (a durable in-progress
 * record with a lease), execute, then store the outcome, release the key, or keep the lease.
 */
/** How an operation's outcome is kept for replays. */
interface ReplayPolicy {
  /** API-key creates: the short secret window, 4xx not stored. */
  secretBearing: boolean;
  /** The stored response is sealed with the secret box. */
  encrypted: boolean;
}

export class Idempotency {
  private readonly mutex = new KeyedMutex();

  constructor(
    private readonly repo: IdempotencyRepo,
    private readonly box: SecretBox,
    private times: IdempotencyTimes,
    private readonly clock: Clock,
  ) {}

  configure(times: IdempotencyTimes): void {
    this.times = times;
  }

  /**
   * `secretBearing` (API-key creates): stored encrypted, replayed for the short secret window, 4xx
   * not stored. `sealed`: the response holds a secret, so it is stored encrypted; otherwise the
   * ordinary rules.
   */
  middleware(secretBearing: boolean, sealed = false) {
    const policy: ReplayPolicy = { secretBearing, encrypted: secretBearing || sealed };
    // Most requests carry no key: they pass straight on, without Node building headersDistinct
    // (a copy of every header) for them, nor a promise of this layer's own.
    return (ctx: ApiContext, next: Next): Promise<void> =>
      ctx.req.headers['idempotency-key'] === undefined ? next() : this.keyed(policy, ctx, next, ctx.req.headersDistinct['idempotency-key']!);
  }

  /** The state machine for a request that carries an Idempotency-Key. */
  private async keyed(policy: ReplayPolicy, ctx: ApiContext, next: Next, values: string[]): Promise<void> {
    if (values.length > 1) throw badRequest('Idempotency-Key must be given once');
    // Header bytes arrive as latin1; the limit counts the characters the client sent (UTF-8).
    const key = Buffer.from(values[0]!, 'latin1').toString('utf8');
    if (!validKey(key)) throw badRequest(`Idempotency-Key must be 1 to ${MAX_KEY_LENGTH} characters`);
    const { account, key: apiKey } = ctx.state.auth!;
    const accountId = account.id;
    const caller: Caller = { keyId: apiKey.id, scopes: scopesDigest(apiKey.scopes.map((s) => s.scope)) };
    // Routing ignores case and a trailing slash, so the resolved path does too.
    const print = fingerprint(ctx.method, ctx.path.toLowerCase().replace(/\/+$/, ''), ctx.state.rawBody);

    const claimed = await this.claim(accountId, key, print, caller, ctx);
    if (!claimed) return;

    let status: number;
    let body: string;
    try {
      await next();
      status = ctx.status;
      body = JSON.stringify(ctx.body ?? null);
    } catch (err) {
      status = err instanceof AppError ? err.status : 500;
      await this.finish(claimed, policy, status, JSON.stringify({ message: (err as Error).message }));
      throw err;
    }
    await this.finish(claimed, policy, status, body);
  }

  /** Returns the in-progress record now held, or null when the response was already decided. */
  private async claim(accountId: string, key: string, print: string, caller: Caller, ctx: ApiContext): Promise<IdempotencyRecord | null> {
    return this.mutex.run(`${accountId}:${key}`, async () => {
      const now = this.clock.now();
      const existing = await this.repo.get(accountId, key);
      const decision = decide(existing, print, now, caller);
      switch (decision.kind) {
        case 'other_caller':
          throw new AppError(
            422,
            decision.why === 'key'
              ? 'idempotency key was already used by another API key'
              : 'idempotency key was already used by this API key with other scopes',
          );
        case 'mismatch':
          throw new AppError(422, 'idempotency key was already used with a different request payload');
        case 'in_progress':
          throw new AppError(409, 'A request with this idempotency key is already in progress', {
            'Idempotent-Replayed': 'false',
            'Retry-After': String(decision.retryAfterSeconds),
          });
        case 'replay': {
          const { response } = decision;
          ctx.status = response.status;
          ctx.type = 'application/json';
          ctx.body = response.encrypted ? this.box.open(response.body) : response.body;
          ctx.set('Idempotent-Replayed', 'true');
          return null;
        }
        case 'execute': {
          const record: IdempotencyRecord = {
            v: 1,
            accountId,
            key,
            fingerprint: print,
            state: 'in_progress',
            expiresAt: now + this.times.lease_seconds * 1000,
            response: null,
            owner: caller,
          };
          try {
            await this.repo.save(record, existing);
          } catch (err) {
            // Cluster mode: another node claimed (or finished) this key between the read and the write.
            if (err instanceof WriteConflictError) {
              throw new AppError(409, 'A request with this idempotency key is already in progress', {
                'Idempotent-Replayed': 'false',
                'Retry-After': '1',
              });
            }
            throw err;
          }
          return record;
        }
      }
    });
  }

  /** Deletes expired records, under the same per-key lock as a claim, in bounded batches. */
  async purgeExpired(now: number, batchSize = 500): Promise<number> {
    let purged = 0;
    for (;;) {
      const entries = await this.repo.expired(now, batchSize);
      if (entries.length === 0) return purged;
      for (const { indexKey, record } of entries) {
        if (!record) {
          await this.repo.dropIndexEntry(indexKey);
          continue;
        }
        await this.mutex.run(`${record.accountId}:${record.key}`, async () => {
          const current = await this.repo.get(record.accountId, record.key);
          if (current && current.expiresAt === record.expiresAt) {
            await this.repo.remove(current);
            purged++;
          } else {
            await this.repo.dropIndexEntry(indexKey);
          }
        });
      }
    }
  }

  private async finish(claimed: IdempotencyRecord, policy: ReplayPolicy, status: number, body: string): Promise<void> {
    await this.mutex.run(`${claimed.accountId}:${claimed.key}`, async () => {
      // An execution that outlived its lease no longer owns the key: leave the newer claim alone.
      const current = await this.repo.get(claimed.accountId, claimed.key);
      if (!current || current.state !== 'in_progress' || current.expiresAt !== claimed.expiresAt) return;
      await this.settle(claimed, policy, status, body);
    });
  }

  private async settle(claimed: IdempotencyRecord, policy: ReplayPolicy, status: number, body: string): Promise<void> {
    switch (settle(status, policy.secretBearing)) {
      case 'keep_lease':
        return;
      case 'release':
        await this.repo.remove(claimed);
        return;
      case 'complete': {
        const times = this.times;
        const ttl = policy.secretBearing ? times.secret_retention_seconds * 1000 : times.retention_hours * 3600 * 1000;
        const completed: IdempotencyRecord = {
          ...claimed,
          state: 'completed',
          expiresAt: this.clock.now() + ttl,
          response: { status, body: policy.encrypted ? this.box.seal(body) : body, encrypted: policy.encrypted },
        };
        await this.repo.save(completed, claimed);
        return;
      }
    }
  }
}
