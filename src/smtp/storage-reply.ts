import { InsufficientStorageError } from '../store/storage-guard.ts';
import { SharedStoreError, StoreWriteError } from '../store/store.ts';
import { reply } from './session-limits.ts';

/** What the SMTP listeners ask of the storage guard: one boolean per transaction. */
export interface StorageState {
  readonly ok: boolean;
}

/** Postfix's answer while its queue filesystem is short of room: try again later. */
export const INSUFFICIENT_STORAGE = '4.3.1 Insufficient system storage';

/** The 452 reply while the store cannot take writes (at MAIL FROM: before any work is done), else null. */
export function storageRefusal(storage: StorageState | undefined): Error | null {
  return storage && !storage.ok ? reply(452, INSUFFICIENT_STORAGE) : null;
}

/** Whether a failure to store a message was the store refusing writes (452 4.3.1, not 451). */
export function isStorageFailure(err: unknown, storage: StorageState | undefined): boolean {
  return err instanceof StoreWriteError || err instanceof InsufficientStorageError || (storage !== undefined && !storage.ok);
}

/** Cluster mode: the shared database cannot be reached (down, or failing over): not a lack of storage, a moment. */
export const SHARED_STORE_UNAVAILABLE = '4.3.0 The cluster database cannot be reached; try again later';

/** The 451 for a failure to reach the cluster database, else null. */
export function sharedStoreRefusal(err: unknown): Error | null {
  return err instanceof SharedStoreError ? reply(451, SHARED_STORE_UNAVAILABLE) : null;
}
