import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The built files the dashboard serves, by their path under /ui/, with their media types. */
export const ASSETS: Readonly<Record<string, { file: string; type: string }>> = {
  '/ui/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/ui/assets/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/ui/assets/app.css': { file: 'app.css', type: 'text/css; charset=utf-8' },
};

/**
 * The package's root: the nearest folder above this module holding package.json (this file runs
 * from src/dashboard under tsx and from dist/dashboard once compiled).
 */
export function packageRoot(from: string = dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${from}`);
    dir = up;
  }
}

/** Where `npm run build:ui` writes the dashboard: dist/ui under the package root. */
export function defaultAssetsDir(): string {
  return join(packageRoot(), 'dist', 'ui');
}

/** Whether the dashboard is built in `dir` (its page is there). */
export function isBuilt(dir: string): boolean {
  return existsSync(join(dir, 'index.html'));
}

/** One built file's bytes, or null when it is not there. Read per request: a rebuild is served at once, and the files are small. */
export async function readAsset(dir: string, file: string): Promise<Buffer | null> {
  try {
    return await readFile(join(dir, file));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}
