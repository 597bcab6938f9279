#!/usr/bin/env node
// The `postilion` command. `npm run build` compiles it with the rest of src/ into
// dist/cli/postilion.js, which the bin, `npm start` and the systemd unit run: plain JavaScript.
// Run from src/ (tests, development: `npm run dev`), it first registers tsx, the TypeScript
// loader (a development dependency), relative to this file, so it works from any directory.
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';

// libuv's thread pool (DKIM signing, LevelDB, scrypt, fs): two threads per core, at least 4. The
// signer keeps one signature per thread in flight (domains/signer.ts); a synced write that holds
// a thread for its fsync no longer halves the signing (measured: 2 threads on 2 cores delivered
// ~15 % less than 4). Set before the pool first starts; an operator's own setting wins.
process.env.UV_THREADPOOL_SIZE ??= String(Math.max(4, 2 * availableParallelism()));
// main.ts beside this file: the sources. In dist/ there is main.js, and tsc has rewritten the
// import below to './main.js'.
if (existsSync(new URL('./main.ts', import.meta.url))) (await import('tsx/esm/api')).register();
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv);
