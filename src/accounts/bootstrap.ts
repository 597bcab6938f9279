import { closeSync, fsyncSync, openSync, rmSync, writeSync } from 'node:fs';
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

/** The one place a bootstrap secret is written: to the operator's terminal or writeBootstrapFile, never to the log. */
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

/**
 * Writes the announcement to `path`, readable by its owner only, for a daemon whose stdout is the
 * journal. The file is created anew with mode 0600, so it is never readable by others, not even
 * for a moment (a file left by an earlier data directory is replaced).
 */
export function writeBootstrapFile(path: string, announcement: string): void {
  rmSync(path, { force: true });
  const fd = openSync(path, 'wx', 0o600);
  try {
    writeSync(fd, `# Written by the Postilion daemon on its first start. Store the key elsewhere, then delete this file.\n${announcement}`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
