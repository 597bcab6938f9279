import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { readRawStore } from '../store/raw-copy.ts';
import { badRequest, conflict } from '../util/errors.ts';
import { FORMAT, FORMAT_VERSION, isSafePath, MANIFEST, RecordDigest, sha256, type BackupSummary } from './format.ts';
import { BACKUP_DATA, BACKUP_KEYS } from './writer.ts';

/** LevelDB's own lock and its informational logs are not part of the data. */
const NOT_DATA = new Set(['LOCK', 'LOG', 'LOG.old']);

export interface RestoreTarget {
  dataDir: string;
  keysDir: string;
  /** Whether a daemon answers on the target's control socket. */
  daemonRuns(): Promise<boolean>;
}

export interface RestoreResult {
  summary: BackupSummary;
  dataDir: string;
  keysDir: string;
}

/**
 * Puts a backup (writer.ts) in place: its store into an empty data directory, its key files into
 * the keys directory, which must not hold any of them. Refused, with nothing written, when a
 * daemon runs there, the data directory holds anything, a key file would be overwritten, or the
 * backup is incomplete or damaged (its key files are checked against the manifest before
 * anything is copied, its records after, in place; a failed check removes what was copied).
 */
export async function restoreBackup(from: string, target: RestoreTarget): Promise<RestoreResult> {
  const source = resolve(from);
  const summary = readManifest(source);
  const dataDir = resolve(target.dataDir);
  const keysDir = resolve(target.keysDir);
  if (await target.daemonRuns()) throw conflict(`a daemon is running on ${dataDir}: stop it first (restore only writes to a stopped, empty data directory)`);
  if (existsSync(dataDir)) {
    if (!statSync(dataDir).isDirectory()) throw badRequest(`data.dir ${dataDir} is not a directory`);
    const entries = readdirSync(dataDir);
    if (entries.length > 0) {
      throw badRequest(
        `data.dir ${dataDir} is not empty (${entries.slice(0, 3).join(', ')}${entries.length > 3 ? ', …' : ''}): restore only onto an empty data directory (move this one away first)`,
      );
    }
  }
  const keyFiles = summary.files.map((f) => {
    const data = readFileSync(join(source, BACKUP_KEYS, ...f.path.split('/')));
    if (sha256(data) !== f.sha256) throw badRequest(`${from} is damaged: ${BACKUP_KEYS}/${f.path} is not the file the backup took`);
    return { ...f, data };
  });
  const clashes = keyFiles.filter((f) => existsSync(join(keysDir, ...f.path.split('/'))));
  if (clashes.length > 0) {
    throw badRequest(
      `keys.dir ${keysDir} already holds ${clashes
        .slice(0, 3)
        .map((f) => f.path)
        .join(', ')}${clashes.length > 3 ? ', …' : ''}: restore would overwrite them (move them away first)`,
    );
  }

  const dataCreated = !existsSync(dataDir);
  const written: string[] = [];
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    for (const name of readdirSync(join(source, BACKUP_DATA))) {
      if (NOT_DATA.has(name)) continue;
      copyFileSync(join(source, BACKUP_DATA, name), join(dataDir, name));
      syncFile(join(dataDir, name));
    }
    const digest = new RecordDigest();
    for await (const chunk of readRawStore(dataDir)) for (const [key, value] of chunk) digest.add(key, value);
    if (digest.count !== summary.records || digest.hex() !== summary.records_sha256) {
      throw badRequest(`${from} is damaged: its store holds ${digest.count} records, not the ${summary.records} the backup took (or not the same ones)`);
    }
    mkdirSync(keysDir, { recursive: true, mode: 0o700 });
    for (const f of keyFiles) {
      const parts = f.path.split('/');
      mkdirSync(join(keysDir, ...parts.slice(0, -1)), { recursive: true, mode: 0o700 });
      const path = join(keysDir, ...parts);
      const fd = openSync(path, 'wx', 0o600);
      written.push(path);
      try {
        writeFileSync(fd, f.data);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      // The mode it had, never more open than the owner's read-write and others' read (certificates).
      chmodSync(path, parseInt(f.mode, 8) & 0o644);
    }
  } catch (err) {
    for (const path of written) rmSync(path, { force: true });
    if (dataCreated) rmSync(dataDir, { recursive: true, force: true });
    else for (const name of readdirSync(dataDir)) rmSync(join(dataDir, name), { recursive: true, force: true });
    throw err;
  }
  return { summary, dataDir, keysDir };
}

/** The backup's manifest, checked: a directory without one is not a (finished) backup. */
export function readManifest(dir: string): BackupSummary {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw badRequest(`${dir} is not a directory`);
  let summary: BackupSummary;
  try {
    summary = JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8')) as BackupSummary;
  } catch (err) {
    const why =
      (err as NodeJS.ErrnoException).code === 'ENOENT'
        ? `it has no ${MANIFEST} (not a backup, or one that did not finish)`
        : `its ${MANIFEST} is not valid JSON`;
    throw badRequest(`${dir} is not a Postilion backup: ${why}`);
  }
  if (summary?.format !== FORMAT || summary.version !== FORMAT_VERSION)
    throw badRequest(`${dir}/${MANIFEST} is not a backup of this format (${FORMAT} ${FORMAT_VERSION})`);
  if (!Number.isInteger(summary.records) || typeof summary.records_sha256 !== 'string' || !Array.isArray(summary.files))
    throw badRequest(`${dir}/${MANIFEST} is incomplete`);
  for (const f of summary.files) {
    if (typeof f?.path !== 'string' || !isSafePath(f.path) || typeof f.sha256 !== 'string' || !/^0[0-7]{3}$/.test(String(f.mode))) {
      throw badRequest(`${dir}/${MANIFEST} is damaged: a key file entry is malformed or leaves keys.dir`);
    }
  }
  if (!existsSync(join(dir, BACKUP_DATA, 'CURRENT'))) throw badRequest(`${dir} is damaged: ${BACKUP_DATA}/ holds no store`);
  return summary;
}

function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
