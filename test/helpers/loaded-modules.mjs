// Registered with `node --import` before a command runs: every file the process loads (ES modules,
// and CommonJS through the ES loader) is appended, as a file: URL, to the file named by
// TEST_LOADED_MODULES. Plain JavaScript: it runs before any TypeScript loader.
import { register } from 'node:module';

register('./loaded-modules-hooks.mjs', import.meta.url);
