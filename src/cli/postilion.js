#!/usr/bin/env node
// Launcher: registers the TypeScript loader relative to this file, so the command works from any
// working directory (npm start, the systemd unit, a global install).
import { register } from 'tsx/esm/api';

register();
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv);
