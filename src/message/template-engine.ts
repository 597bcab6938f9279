import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as util from 'node:util';

/**
 * The MiniJinja engine (minijinja-js, WebAssembly) as something that can be thrown away.
 *
 * minijinja-js keeps one WebAssembly instance per process, in its module. A trap inside it (a
 * stack overflow on deep input, an allocation that fails) leaves that instance's memory in an
 * unknown state: every later render of every tenant then fails. So the glue module is evaluated
 * here in a scope of its own, and `replace()` evaluates it again, with a new instance, after any
 * internal failure.
 *
 * The instance's memory is also capped (MAX_MEMORY_PAGES, by rewriting the module's memory limits
 * before it is compiled): templates can amplify text faster than fuel counts instructions
 * (`"x" * 100000000`, a string doubled in a loop), and a capped memory turns that into a trap after
 * at most that many bytes instead of gigabytes. The trap replaces the engine like any other.
 */
export type MiniJinja = typeof import('minijinja-js');

/** 64 KiB pages: 64 MiB, far above what a template of the size we accept needs. */
export const MAX_MEMORY_PAGES = 1024;

const require = createRequire(import.meta.url);
const GLUE = require.resolve('minijinja-js');
const GLUE_SOURCE = readFileSync(GLUE, 'utf8');
const WASM = capMemory(readFileSync(join(dirname(GLUE), 'minijinja_js_bg.wasm')), MAX_MEMORY_PAGES);

export class TemplateEngine {
  private current: MiniJinja = load();
  private generation = 0;

  get module(): MiniJinja {
    return this.current;
  }

  /** How many times the engine was replaced (tests, logs). */
  get replacements(): number {
    return this.generation;
  }

  /** A new instance for every render from now on; environments of the old one must not be used again. */
  replace(): void {
    this.current = load();
    this.generation += 1;
  }
}

/** Evaluates the CommonJS glue as Node would, but reading our capped module bytes. */
function load(): MiniJinja {
  const module = { exports: {} as Record<string, unknown> };
  const glueRequire = (name: string): unknown => {
    switch (name) {
      case 'fs':
        return { readFileSync: () => WASM };
      case 'path':
        return { join };
      case 'util':
        return util;
      default:
        return require(name);
    }
  };
  // The glue is wasm-bindgen's generated loader of this exact package version (pinned).
  const evaluate = new Function('module', 'exports', 'require', '__dirname', '__filename', GLUE_SOURCE) as (
    m: typeof module,
    e: typeof module.exports,
    r: typeof glueRequire,
    d: string,
    f: string,
  ) => void;
  evaluate(module, module.exports, glueRequire, dirname(GLUE), GLUE);
  return module.exports as unknown as MiniJinja;
}

/** The module with its (one, defined) memory given a maximum of `maxPages`. */
export function capMemory(wasm: Buffer, maxPages: number): Buffer {
  let at = 8;
  const leb = (): number => {
    let result = 0;
    let shift = 0;
    let byte: number;
    do {
      byte = wasm[at++]!;
      result |= (byte & 0x7f) << shift;
      shift += 7;
    } while (byte & 0x80);
    return result >>> 0;
  };
  while (at < wasm.length) {
    const sectionStart = at;
    const id = wasm[at++]!;
    const size = leb();
    const contentStart = at;
    if (id === 5) {
      const count = leb();
      const flags = wasm[at++]!;
      const min = leb();
      if (count !== 1 || (flags & ~1) !== 0) throw new Error('minijinja-js: unexpected memory section');
      const max = flags & 1 ? Math.min(leb(), maxPages) : maxPages;
      const content = Buffer.concat([encodeLeb(1), Buffer.from([1]), encodeLeb(min), encodeLeb(Math.max(min, max))]);
      return Buffer.concat([
        wasm.subarray(0, sectionStart),
        Buffer.from([5]),
        encodeLeb(content.length),
        content,
        wasm.subarray(contentStart + size),
      ]);
    }
    at = contentStart + size;
  }
  throw new Error('minijinja-js: the module defines no memory');
}

function encodeLeb(value: number): Buffer {
  const bytes: number[] = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    bytes.push(byte);
  } while (value !== 0);
  return Buffer.from(bytes);
}
