// Loader hooks (see loaded-modules.mjs): each file: URL loaded is written down, then loaded as usual.
import { appendFileSync } from 'node:fs';

export async function load(url, context, nextLoad) {
  if (url.startsWith('file:') && process.env.TEST_LOADED_MODULES) appendFileSync(process.env.TEST_LOADED_MODULES, `${url}\n`);
  return nextLoad(url, context);
}
