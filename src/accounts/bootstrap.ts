import type { AccountRecord, ApiKeyRecord } from '../store/records.ts';
import type { Store } from '../store/store.ts';
import type { Accounts } from './accounts.ts';
import type { ApiKeys } from './api-keys.ts';
import { EVERY_GLOBAL_SCOPE } from './scopes.ts';

export interface Bootstrapped {
  account: AccountRecord;
  key: ApiKeyRecord;
  secret: string;
}

export interface BootstrapInput {
  name: string;
  website: string;
  ownerEmail: string;
}

/**
 * The first account of a fresh server and an administrator key holding every scope, written in
 * one commit: a crash can never leave an account without its key.
 */
export async function bootstrap(store: Store, accounts: Accounts, apiKeys: ApiKeys, input: BootstrapInput): Promise<Bootstrapped> {
  const created = await accounts.prepareCreate(input);
  const { key, secret, ops } = await apiKeys.prepareCreate(created.account.id, { label: 'bootstrap admin key', scopes: EVERY_GLOBAL_SCOPE });
  await store.commit([...created.ops, ...ops]);
  return { account: created.account, key, secret };
}

export function bootstrapDefaults(hostname: string): BootstrapInput {
  return { name: 'Postilion', website: `https://${hostname}`, ownerEmail: `postmaster@${hostname}` };
}

/** The one place a bootstrap secret is written: to the operator's terminal, never to the log. */
export function formatBootstrap(result: Bootstrapped, apiUrl?: string): string {
  const lines = [
    '',
    'Postilion: created the first account and an administrator API key.',
    `  account id: ${result.account.id}`,
    `  API key:    ${result.secret}`,
    '  The key is shown only this once: store it now.',
  ];
  if (apiUrl) lines.push(`  Try: curl -H "Authorization: Bearer ${result.secret}" ${apiUrl}/v2/ping`);
  return lines.join('\n') + '\n\n';
}
