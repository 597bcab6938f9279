import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createRawStore, type RawStoreWriter } from '../store/raw-copy.ts';
import { badRequest } from '../util/errors.ts';
import { BackupStreamError, decodeFrames, MANIFEST, RecordDigest, sha256, type BackupSummary } from './format.ts';

/**
 * A backup directory, as `postilion backup <dir>` writes it from the daemon's stream:
 *
 *   <dir>/data/                 the store: a LevelDB, a data directory of its own
 *   <dir>/keys/                 every key file, with its relative path and mode
 *   <dir>/postilion-backup.json the summary, written last: without it the directory is not a backup
 *
 * Everything is mode 0700/0600: a backup holds every secret of the installation.
 */
export const BACKUP_DATA = 'data';
export const BACKUP_KEYS = 'keys';

/** Refuses a target that holds anything: a backup never mixes with other files. */
export function checkBackupTarget(dir: string): void {
  if (!existsSync(dir)) return;
  if (!statSync(dir).isDirectory()) throw badRequest(`${dir} exists and is not a directory: back up into a new or empty directory`);
  const entries = readdirSync(dir);
  if (entries.length > 0)
    throw badRequest(`${dir} is not empty (${entries.slice(0, 3).join(', ')}${entries.length > 3 ? ', …' : ''}): back up into a new or empty directory`);
}

/**
 * Writes the stream into `dir` (new or empty) and checks it: every record and key file
 * arrived (counts and SHA-256 digests of the end frame). On any failure what was written goes
 * and the error is thrown. The summary, as written to the manifest.
 */
export async function writeBackup(dir: string, stream: AsyncIterable<Buffer>): Promise<BackupSummary> {
  const target = resolve(dir);
  checkBackupTarget(target);
  const created = !existsSync(target);
  mkdirSync(target, { recursive: true, mode: 0o700 });
  let store: RawStoreWriter | null = null;
  try {
    const digest = new RecordDigest();
    const files = new Map<string, string>();
    let summary: BackupSummary | null = null;
    for await (const frame of decodeFrames(stream)) {
      if (frame.type === 'file') {
        const path = join(target, BACKUP_KEYS, ...frame.file.path.split('/'));
        mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
        writeSynced(path, frame.file.data);
        files.set(frame.file.path, sha256(frame.file.data));
      } else if (frame.type === 'records') {
        store ??= await createRawStore(join(target, BACKUP_DATA));
        for (const [key, value] of frame.entries) digest.add(key, value);
        await store.put(frame.entries);
      } else summary = frame.summary;
    }
    if (!summary) throw new BackupStreamError('the backup stream has no end frame');
    store ??= await createRawStore(join(target, BACKUP_DATA));
    await store.close();
    store = null;
    if (summary.records !== digest.count || summary.records_sha256 !== digest.hex()) {
      throw new BackupStreamError(`the records received (${digest.count}) are not the ${summary.records} the daemon sent`);
    }
    for (const f of summary.files) {
      if (files.get(f.path) !== f.sha256) throw new BackupStreamError(`the key file ${f.path} did not arrive whole`);
    }
    mkdirSync(join(target, BACKUP_KEYS), { recursive: true, mode: 0o700 });
    const temporary = join(target, `${MANIFEST}.tmp`);
    writeSynced(temporary, Buffer.from(`${JSON.stringify(summary, null, 2)}\n`));
    renameSync(temporary, join(target, MANIFEST));
    syncDir(target);
    return summary;
  } catch (err) {
    await store?.close().catch(() => undefined);
    if (created) rmSync(target, { recursive: true, force: true });
    else for (const name of readdirSync(target)) rmSync(join(target, name), { recursive: true, force: true });
    throw err;
  }
}

function writeSynced(path: string, data: Buffer): void {
  const fd = openSync(path, 'wx', 0o600);
  try {
    writeFileSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function syncDir(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
