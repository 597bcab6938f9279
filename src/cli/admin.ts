import type { Command } from 'commander';
import { badRequest } from '../util/errors.ts';
import { isUuid } from '../util/ids.ts';
import { openCore, type Core } from '../daemon.ts';
import { configFrom } from './main.ts';

/**
 * Admin commands work on the store directly. The store is locked by a running daemon, so they
 * are for a stopped server (or a fresh data dir); the HTTP API serves a running one.
 */
export async function withCore<T>(program: Command, fn: (core: Core) => Promise<T>): Promise<T> {
  const core = await openCore(configFrom(program));
  try {
    return await fn(core);
  } finally {
    await core.store.close();
  }
}

/** An --account option: a UUID, lower-cased. */
export function accountId(value: string): string {
  if (!isUuid(value)) throw badRequest(`--account: "${value}" is not an account id`);
  return value.toLowerCase();
}
