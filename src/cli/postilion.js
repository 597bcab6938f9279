#!/usr/bin/env node
// The `postilion` command. `npm run build` compiles it with the rest of src/ into
// dist/cli/postilion.js, which the bin, `npm start` and the systemd unit run: plain JavaScript.
// Run from src/ (tests, development: `npm run dev`), it first registers tsx, the TypeScript
// loader (a development dependency), relative to this file, so it works from any directory.
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';

// libuv's thread pool (LevelDB, DKIM signing, scrypt, fs) sized to the cores, not its default 4:
// on a small machine four pool threads crowd out the event loop (about +25 % delivered mail/s on
// 2 cores). Set before the pool first starts; an operator's own setting wins.
process.env.UV_THREADPOOL_SIZE ??= String(Math.max(2, availableParallelism()));
// main.ts beside this file: the sources. In dist/ there is main.js, and tsc has rewritten the
// import below to './main.js'.
if (existsSync(new URL('./main.ts', import.meta.url))) (await import('tsx/esm/api')).register();
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv);
