import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Store } from '../store/store.ts';
import { iso, type Clock } from '../util/time.ts';
import { encodeEnd, encodeFile, encodeRecords, MAGIC, RECORDS_FRAME_BYTES, RecordDigest, sha256, type BackupSummary, type KeyFile } from './format.ts';

/** keys/README.md is the repository's, not the installation's: a fresh checkout already has it. */
const NOT_KEYS = new Set(['README.md']);

/**
 * The backup stream of a store and its keys directory (see format.ts), as they stood at one
 * instant: the store's snapshot is taken and the key files are read before this returns, with
 * nothing else running in between, so a key file the snapshot's records name is in it (DKIM
 * keys are written before the record that names them). The records follow as the stream is
 * read; writes that land meanwhile are not in it. Works on the daemon's open store, the daemon
 * going on.
 */
export function backupStream(store: Store, keysDir: string, clock: Clock): AsyncGenerator<Buffer> {
  const createdAt = iso(clock.now());
  const snapshot = store.snapshot();
  let files: KeyFile[];
  try {
    files = readKeyFiles(resolve(keysDir));
  } catch (err) {
    void snapshot.close();
    throw err;
  }
  return (async function* () {
    try {
      yield MAGIC;
      for (const file of files) yield encodeFile(file);
      const digest = new RecordDigest();
      let pending: Array<[Buffer, Buffer]> = [];
      let bytes = 0;
      for await (const chunk of snapshot.entries()) {
        for (const [key, value] of chunk) {
          digest.add(key, value);
          pending.push([key, value]);
          bytes += key.length + value.length + 8;
          if (bytes >= RECORDS_FRAME_BYTES) {
            yield encodeRecords(pending);
            pending = [];
            bytes = 0;
          }
        }
      }
      if (pending.length > 0) yield encodeRecords(pending);
      const summary: BackupSummary = {
        format: 'postilion-backup',
        version: 1,
        created_at: createdAt,
        source: { data_dir: store.dir, keys_dir: resolve(keysDir) },
        records: digest.count,
        records_sha256: digest.hex(),
        files: files.map((f) => ({ path: f.path, bytes: f.data.length, mode: `0${(f.mode & 0o777).toString(8)}`, sha256: sha256(f.data) })),
      };
      yield encodeEnd(summary);
    } finally {
      await snapshot.close();
    }
  })();
}

/**
 * Every regular file under the keys directory (following links: a certificate is often one),
 * read now. Small files: the at-rest keys, TLS material, DKIM keys.
 */
export function readKeyFiles(dir: string): KeyFile[] {
  const files: KeyFile[] = [];
  const walk = (abs: string, rel: string) => {
    let names: string[];
    try {
      names = readdirSync(abs).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && rel === '') return;
      throw err;
    }
    for (const name of names) {
      // A key being written (written to <name>.<pid>.tmp, then renamed) is not a key yet.
      if ((rel === '' && NOT_KEYS.has(name)) || name.endsWith('.tmp')) continue;
      const path = join(abs, name);
      const relPath = rel === '' ? name : `${rel}/${name}`;
      try {
        const stat = statSync(path);
        if (stat.isDirectory()) walk(path, relPath);
        else if (stat.isFile()) files.push({ path: relPath, mode: stat.mode & 0o777, data: readFileSync(path) });
      } catch (err) {
        // Removed since it was listed (a retired DKIM key): not part of the keys any more.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  };
  walk(dir, '');
  return files;
}
