import { accessSync, constants, existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from '../config/schema.ts';
import { describeWriteError, formatBytes, isLow, lowSpaceText, readSpaceSync, requiredFreeBytes, type SpaceReading } from '../store/storage-guard.ts';
import { fail, ok, warn, type Check } from './check.ts';

/** Free bytes under which the keys directory is worth a look (DKIM keys and certificates are small). */
const KEYS_LOW_BYTES = 1024 * 1024;

/**
 * Free space and writability of the data and keys directories, against the storage guard: below
 * its floor the daemon refuses new mail (and does not start); within twice the floor, it soon will.
 */
export function checkStorage(config: Config, read: (dir: string) => SpaceReading = readSpaceSync): Check[] {
  const settings = { minFreeBytes: config.storage.min_free_bytes, minFreePercent: config.storage.min_free_percent };
  const data = resolve(config.data.dir);
  const keys = resolve(config.keys.dir);
  const checks: Check[] = [];
  const dataSpace = readOrNull(data, read);
  if (!dataSpace) checks.push(warn('storage data', `cannot read the free space of ${data}'s filesystem`));
  else {
    const need = requiredFreeBytes(dataSpace.total, settings);
    const free = `${formatBytes(dataSpace.free)} free of ${formatBytes(dataSpace.total)}`;
    if (isLow(dataSpace, settings))
      checks.push(fail('storage data', `${lowSpaceText(data, dataSpace, settings)}: new mail is refused and the daemon does not start`));
    else if (dataSpace.free < 2 * need)
      checks.push(
        warn(
          'storage data',
          `${data}: ${free}, within twice the floor of ${formatBytes(need)} (storage.min_free_bytes / min_free_percent): new mail will be refused below it`,
        ),
      );
    else checks.push(ok('storage data', `${data}: ${free} (floor ${formatBytes(need)})`));
  }
  checks.push(...writable('storage data', data));
  const keysSpace = readOrNull(keys, read);
  if (!keysSpace) checks.push(warn('storage keys', `cannot read the free space of ${keys}'s filesystem`));
  else if (keysSpace.free < KEYS_LOW_BYTES)
    checks.push(warn('storage keys', `${keys}: only ${formatBytes(keysSpace.free)} free: new DKIM keys and certificates may not be written`));
  else checks.push(ok('storage keys', `${keys}: ${formatBytes(keysSpace.free)} free of ${formatBytes(keysSpace.total)}`));
  checks.push(...writable('storage keys', keys));
  return checks;
}

function readOrNull(dir: string, read: (dir: string) => SpaceReading): SpaceReading | null {
  try {
    return read(dir);
  } catch {
    return null;
  }
}

/** A FAIL when the directory exists and cannot be written (read-only filesystem, permissions). */
function writable(check: string, dir: string): Check[] {
  if (!existsSync(dir)) return [];
  try {
    accessSync(dir, constants.W_OK);
    return [];
  } catch (err) {
    return [fail(check, `${describeWriteError(err, dir).text}: the daemon cannot write there`)];
  }
}
