import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** A listener's PEM certificate and key, relative to keys.dir; a missing file stops the start. */
export function readTlsFiles(keysDir: string, files: { cert: string; key: string }, option: string): { cert: Buffer; key: Buffer } {
  const cert = resolve(keysDir, files.cert);
  const key = resolve(keysDir, files.key);
  for (const path of [cert, key]) {
    if (!existsSync(path)) throw new Error(`${option} is enabled but ${path} does not exist`);
  }
  return { cert: readFileSync(cert), key: readFileSync(key) };
}
