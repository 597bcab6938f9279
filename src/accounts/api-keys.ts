import { createHash } from 'node:crypto';
import type ipaddr from 'ipaddr.js';
import type { ApiKeysRepo } from '../store/api-keys-repo.ts';
import type { PageRequest, Page } from '../store/page.ts';
import type { ApiKeyRecord, ApiKeyScopeRecord } from '../store/records.ts';
import type { WriteOp } from '../store/group-commit.ts';
import type { Store } from '../store/store.ts';
import { AppError, badRequest, conflict, forbidden, notFound } from '../util/errors.ts';
import { newId, randomAlphanumeric } from '../util/ids.ts';
import { KeyedMutex } from '../util/keyed-mutex.ts';
import { isPrintable } from '../util/text.ts';
import { iso, type Clock } from '../util/time.ts';
import { AllowListError, allowListCovers, normalizeAllowList } from './ip-allow-list.ts';
import { parseScope, ScopeError, validateScopes, type DomainOwnership, type Grants } from './scopes.ts';

export const SECRET_PREFIX = 'aha-sk-';
export const PUBLIC_PREFIX = 'aha-pk-';
export const SECRET_PATTERN = /^aha-sk-[A-Za-z0-9]{64}$/;
/** last_used_at is refreshed at most this often, so authentication does not write on every call. */
const LAST_USED_RESOLUTION_MS = 5 * 60 * 1000;

export interface NewApiKey {
  label: string;
  scopes: string[];
  ipAllowList?: string[];
  kind?: ApiKeyRecord['kind'];
  /** The grants of the key asking; absent for the operator (CLI, bootstrap), who may grant anything. */
  grantor?: Grants;
}

export interface ApiKeyPatch {
  label?: string;
  scopes?: string[];
  ipAllowList?: string[];
}

/** Who asks for a change: a key cannot lock itself out, nor grant scopes it does not hold. */
export interface Caller {
  keyId: string;
  clientIp: ipaddr.IPv4 | ipaddr.IPv6;
  grants: Grants;
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export class ApiKeys {
  constructor(
    private readonly store: Store,
    private readonly repo: ApiKeysRepo,
    private readonly ownership: DomainOwnership,
    private readonly clock: Clock,
    /** Per-key locks, shared with whoever else rewrites keys (domain deletion). */
    private readonly mutex: KeyedMutex = new KeyedMutex(),
  ) {}

  /** Creates a key; the secret is returned here and never again. */
  async create(accountId: string, input: NewApiKey): Promise<{ key: ApiKeyRecord; secret: string }> {
    const { key, secret, ops } = await this.prepareCreate(accountId, input);
    await this.store.commit(ops);
    return { key, secret };
  }

  /** A new key and its write ops, for a caller that commits them with other writes. */
  async prepareCreate(accountId: string, input: NewApiKey): Promise<{ key: ApiKeyRecord; secret: string; ops: WriteOp[] }> {
    const label = checkLabel(input.label);
    const now = iso(this.clock.now());
    const id = newId();
    const secret = SECRET_PREFIX + randomAlphanumeric(64);
    const key: ApiKeyRecord = {
      v: 1,
      id,
      accountId,
      kind: input.kind ?? 'v2',
      label,
      publicKey: PUBLIC_PREFIX + randomAlphanumeric(64),
      secretHash: hashSecret(secret),
      scopes: await this.scopeRecords(accountId, input.scopes, now, [], input.grantor),
      ipAllowList: allowList(input.ipAllowList ?? []),
      createdAt: now,
      updatedAt: now,
      lastUsedAt: null,
    };
    return { key, secret, ops: this.repo.create(key) };
  }

  /** The live key for a presented secret, or undefined. Refreshes last_used_at coarsely. */
  async authenticate(secret: string): Promise<ApiKeyRecord | undefined> {
    const key = await this.repo.findBySecretHash(hashSecret(secret));
    if (!key) return undefined;
    const now = this.clock.now();
    if (key.lastUsedAt !== null && now - Date.parse(key.lastUsedAt) <= LAST_USED_RESOLUTION_MS) return key;
    // Re-read under the key's lock: writing back the copy read above could undo a concurrent
    // update (an allow list) or resurrect a deleted key.
    return this.mutex.run(key.id, async () => {
      const current = await this.repo.get(key.accountId, key.id);
      if (!current) return undefined;
      const touched = { ...current, lastUsedAt: iso(now) };
      await this.repo.touch(touched, current);
      return touched;
    });
  }

  list(accountId: string, page: PageRequest): Promise<Page<ApiKeyRecord>> {
    return this.repo.list(accountId, page);
  }

  async get(accountId: string, keyId: string): Promise<ApiKeyRecord> {
    const key = await this.repo.get(accountId, keyId);
    if (!key) throw notFound('api key not found');
    return key;
  }

  /**
   * Applies the given fields; at least one must change something (else 400). A key that
   * narrows its own allow list so that the caller's address is no longer covered gets 409.
   */
  async update(accountId: string, keyId: string, patch: ApiKeyPatch, caller: Caller | null): Promise<ApiKeyRecord> {
    return this.mutex.run(keyId, async () => {
      const key = await this.get(accountId, keyId);
      if (caller) mayManage(caller.grants, key);
      const now = iso(this.clock.now());
      const next: ApiKeyRecord = { ...key };
      let changed = false;
      if (patch.label !== undefined && checkLabel(patch.label) !== key.label) {
        next.label = checkLabel(patch.label);
        changed = true;
      }
      if (patch.scopes !== undefined) {
        const scopes = await this.scopeRecords(accountId, patch.scopes, now, key.scopes, caller?.grants);
        if (
          !sameStrings(
            scopes.map((s) => s.scope),
            key.scopes.map((s) => s.scope),
          )
        ) {
          next.scopes = scopes;
          changed = true;
        }
      }
      if (patch.ipAllowList !== undefined) {
        const list = allowList(patch.ipAllowList);
        if (!sameStrings(list, key.ipAllowList)) {
          if (caller && caller.keyId === keyId && !allowListCovers(list, caller.clientIp)) {
            throw conflict('this update would lock the calling key out: its ip_allow_list would not cover your address');
          }
          next.ipAllowList = list;
          changed = true;
        }
      }
      if (!changed) throw badRequest('the request changes nothing: give at least one field with a new value');
      next.updatedAt = now;
      await this.store.commit([this.repo.update(next)]);
      return next;
    });
  }

  /** `grants`: of the key asking (absent for the operator): it must hold every scope of the key it deletes. */
  async delete(accountId: string, keyId: string, grants?: Grants): Promise<ApiKeyRecord> {
    return this.mutex.run(keyId, async () => {
      const key = await this.get(accountId, keyId);
      if (grants) mayManage(grants, key);
      await this.store.commit(this.repo.delete(key));
      return key;
    });
  }

  /** Validated scope records; a scope already held keeps its id and timestamps. */
  private async scopeRecords(
    accountId: string,
    requested: string[],
    now: string,
    current: ApiKeyScopeRecord[],
    grantor?: Grants,
  ): Promise<ApiKeyScopeRecord[]> {
    let validated;
    try {
      validated = await validateScopes(requested, accountId, this.ownership);
    } catch (err) {
      if (err instanceof ScopeError) throw badRequest(err.message);
      throw err;
    }
    if (grantor) {
      const held = new Set(current.map((s) => s.scope));
      for (const { scope } of validated) {
        // A scope the key already has may stay; a new one must be held by the caller.
        if (!held.has(scope) && !grantor.covers(parseScope(scope)!)) {
          throw forbidden(`cannot grant scope "${scope}": the calling key does not hold it`);
        }
      }
    }
    const byScope = new Map(current.map((s) => [s.scope, s]));
    return validated.map(({ scope, domainId }) => byScope.get(scope) ?? { id: newId(), scope, domainId, createdAt: now, updatedAt: now });
  }
}

/**
 * A key may change or delete only a key it could have made: one whose every scope it holds. A
 * narrower key must not loosen a stronger key's allow list, rename it, or take it away.
 */
function mayManage(grants: Grants, key: ApiKeyRecord): void {
  const missing = key.scopes.find((s) => !grants.covers(parseScope(s.scope)!));
  if (missing) throw forbidden(`API key ${key.id} holds scopes the calling key does not hold ("${missing.scope}")`);
}

function allowList(entries: string[]): string[] {
  try {
    return normalizeAllowList(entries);
  } catch (err) {
    if (err instanceof AllowListError) throw new AppError(400, err.message);
    throw err;
  }
}

function sameStrings(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  const set = new Set(b);
  return a.every((x) => set.has(x));
}

function checkLabel(text: string): string {
  const label = text.trim();
  if (label.length === 0 || label.length > 255) throw badRequest('label must be 1 to 255 characters');
  if (!isPrintable(label)) throw badRequest('label must not contain control characters');
  return label;
}
