import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/**
 * The URL of the worker module `name` in the folder of the module at `base` (its
 * `import.meta.url`), with that module's extension: .ts from src/, .js in dist/.
 */
export function moduleBeside(base: string, name: string): URL {
  return new URL(`./${name}${extname(fileURLToPath(base))}`, base);
}

/**
 * A worker thread running the module at `entry`. Compiled (dist/, .js) it is run as it is. From
 * src/ (development and tests, under tsx) it is a .ts file, which a worker cannot load by itself
 * on Node 20 (the parent's loader hooks do not reach it): tsx is registered in the thread first.
 */
export function startModuleWorker(entry: URL, workerData: unknown): Worker {
  if (extname(fileURLToPath(entry)) !== '.ts') return new Worker(entry, { workerData });
  // tsx's ESM API where its package's exports map puts it (this module may itself run as CommonJS).
  const pkg = createRequire(import.meta.url).resolve('tsx/package.json');
  const exported = (JSON.parse(readFileSync(pkg, 'utf8')) as { exports: Record<string, { import: { default: string } }> }).exports['./esm/api']!.import.default;
  const tsx = pathToFileURL(join(dirname(pkg), exported)).href;
  const boot = `import(${JSON.stringify(tsx)}).then(({ register }) => { register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(boot, { eval: true, workerData });
}
