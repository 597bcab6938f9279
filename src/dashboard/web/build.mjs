// Builds the dashboard's browser code into dist/ui/ (beside the compiled daemon, not among its files): one script and one style sheet,
// bundled by esbuild with everything they import (Preact, uPlot), so the daemon serves every
// byte itself (no CDN). Runs at `npm install` (prepare) and `npm run build`, like tsc.
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '../../../dist/ui');
mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: { app: join(here, 'main.tsx') },
  outdir: out,
  bundle: true,
  format: 'esm',
  target: ['chrome111', 'firefox115', 'safari16'],
  minify: true,
  sourcemap: false,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  logLevel: 'warning',
});
copyFileSync(join(here, 'index.html'), join(out, 'index.html'));
