#!/usr/bin/env node
// Launcher: registers the TypeScript loader relative to this file, so the command works from any
// working directory (npm start, the systemd unit, a global install).
import { availableParallelism } from 'node:os';
import { register } from 'tsx/esm/api';

// libuv's thread pool (LevelDB, DKIM signing, scrypt, fs) sized to the cores, not its default 4:
// on a small machine four pool threads crowd out the event loop (about +25 % delivered mail/s on
// 2 cores). Set before the pool first starts; an operator's own setting wins.
process.env.UV_THREADPOOL_SIZE ??= String(Math.max(2, availableParallelism()));
register();
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv);
