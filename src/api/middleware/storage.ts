import type { Next } from 'koa';
import { InsufficientStorageError } from '../../store/storage-guard.ts';
import type { ApiContext } from '../context.ts';

/** What the API asks of the storage guard (store/storage-guard.ts): one boolean per request. */
export interface StorageState {
  readonly ok: boolean;
  readonly reason: string | null;
}

/**
 * Refuses a request that writes (anything but GET/HEAD) while the store cannot take writes:
 * 507 with the reason, before its body is read or any work is done.
 */
export function refuseWithoutStorage(storage: StorageState) {
  // Not async: the chain (koa-compose) turns a throw into a rejection, and next's promise is passed on.
  return (ctx: ApiContext, next: Next): Promise<void> => {
    if (!storage.ok && ctx.method !== 'GET' && ctx.method !== 'HEAD') throw new InsufficientStorageError(storage.reason ?? 'storage unavailable');
    return next();
  };
}
