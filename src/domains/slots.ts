import { randomAlphanumeric } from '../util/ids.ts';
import type { DkimSlotRecord } from '../store/records.ts';
import type { DkimKeyStore } from './dkim-keys.ts';

export const SELECTOR = /^(?!-)[a-z0-9-]{1,62}(?<!-)$/;

/** A fresh selector: `pst` + date + a random suffix, so rotations on one day never collide. */
export function newSelector(now: number): string {
  const date = new Date(now).toISOString().slice(0, 10).replace(/-/g, '');
  return `pst${date}${randomAlphanumeric(4).toLowerCase()}`;
}

/** The Ed25519 key of a slot lives at the RSA selector plus "e" (still one DNS label). */
export function ed25519Selector(selector: string): string {
  return `${selector}e`;
}

/** Generates the keys of a new signing slot: RSA-2048, plus Ed25519 when enabled. */
export async function newSlot(
  keys: DkimKeyStore,
  domainId: string,
  selector: string,
  ed25519: boolean,
  createdAt: string,
  importedPem?: string,
): Promise<DkimSlotRecord> {
  const rsa = importedPem ? await keys.import(domainId, selector, importedPem, createdAt) : await keys.generate(domainId, selector, 'rsa', createdAt);
  const slot: DkimSlotRecord = { keys: [rsa], activatedAt: null, publishUntil: null };
  if (ed25519) slot.keys.push(await keys.generate(domainId, ed25519Selector(selector), 'ed25519', createdAt));
  return slot;
}

export async function removeSlot(keys: DkimKeyStore, domainId: string, slot: DkimSlotRecord): Promise<void> {
  for (const key of slot.keys) await keys.remove(domainId, key.selector);
}
