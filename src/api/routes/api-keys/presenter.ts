import type { ApiKeyRecord } from '../../../store/records.ts';

export function presentApiKey(key: ApiKeyRecord) {
  return {
    object: 'api_key' as const,
    id: key.id,
    created_at: key.createdAt,
    updated_at: key.updatedAt,
    last_used_at: key.lastUsedAt,
    account_id: key.accountId,
    label: key.label,
    public_key: key.publicKey,
    scopes: key.scopes.map((s) => ({
      id: s.id,
      created_at: s.createdAt,
      updated_at: s.updatedAt,
      api_key_id: key.id,
      scope: s.scope,
      domain_id: s.domainId,
    })),
    ip_allow_list: key.ipAllowList,
  };
}
