import type { WriteOp } from './group-commit.ts';
import { readPage, type Page, type PageRequest } from './page.ts';
import type { ApiKeyRecord } from './records.ts';
import type { Store } from './store.ts';

/** API keys, keyed by account then id (so an account's keys list in creation order), plus a hash index. */
export class ApiKeysRepo {
  constructor(private readonly store: Store) {}

  get(accountId: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    return this.store.get<ApiKeyRecord>('apiKeys', primaryKey(accountId, keyId));
  }

  async findBySecretHash(hash: string): Promise<ApiKeyRecord | undefined> {
    const ref = await this.store.get<string>('apiKeysByHash', hash);
    return ref === undefined ? undefined : this.store.get<ApiKeyRecord>('apiKeys', ref);
  }

  list(accountId: string, page: PageRequest): Promise<Page<ApiKeyRecord>> {
    return readPage<ApiKeyRecord>(this.store.families.apiKeys, `${accountId}:`, page);
  }

  /** The record and its hash index; the hash never changes after creation. */
  create(key: ApiKeyRecord): WriteOp[] {
    return [this.update(key), { type: 'put', family: 'apiKeysByHash', key: key.secretHash, value: primaryKey(key.accountId, key.id) }];
  }

  update(key: ApiKeyRecord): WriteOp {
    return { type: 'put', family: 'apiKeys', key: primaryKey(key.accountId, key.id), value: key };
  }

  delete(key: ApiKeyRecord): WriteOp[] {
    return [
      { type: 'del', family: 'apiKeys', key: primaryKey(key.accountId, key.id) },
      { type: 'del', family: 'apiKeysByHash', key: key.secretHash },
    ];
  }

  /**
   * last_used_at is advisory: losing the latest value in a crash is harmless. `current`: the
   * record `key` was made from; in cluster mode the touch is lost if another node changed it since.
   */
  async touch(key: ApiKeyRecord, current: ApiKeyRecord): Promise<void> {
    await this.store.putRelaxed('apiKeys', primaryKey(key.accountId, key.id), key, current);
  }
}

function primaryKey(accountId: string, keyId: string): string {
  return `${accountId}:${keyId}`;
}
