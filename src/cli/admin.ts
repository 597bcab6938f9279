import type { Command } from 'commander';
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
