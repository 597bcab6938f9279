import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as util from 'node:util';
import * as vm from 'node:vm';

/**
 * The MiniJinja engine (minijinja-js, WebAssembly) as something that can be thrown away.
 *
 * minijinja-js keeps one WebAssembly instance per process, in its module. A trap inside it (a
 * stack overflow on deep input, an allocation that fails) or a call stopped from outside leaves
 * that instance's memory in an unknown state: every later render of every tenant then fails. So
 * the glue module is evaluated here in a scope of its own, and `replace()` evaluates it again,
 * with a new instance, after any internal failure. The old instance is retired: its finalizers no
 * longer call into it (a finalizer that throws would end the process).
 *
 * Every call into the engine runs under a wall-clock bound (`run`): MiniJinja's fuel counts
 * instructions, but one instruction can be a filter over megabytes (`("x" * 1000000)|upper` in a
 * loop runs for seconds on little fuel), so time is bounded too.
 *
 * The instance's memory is also capped (MAX_MEMORY_PAGES, by rewriting the module's memory limits
 * before it is compiled): templates can amplify text faster than fuel counts instructions
 * (`"x" * 100000000`, a string doubled in a loop), and a capped memory turns that into a trap after
 * at most that many bytes instead of gigabytes. The trap replaces the engine like any other.
 */
export type MiniJinja = typeof import('minijinja-js');

/** 64 KiB pages: 64 MiB, far above what a template of the size we accept needs. */
export const MAX_MEMORY_PAGES = 1024;

/** A call into the engine stopped at its time bound; the engine must be replaced. */
export class EngineOverrun extends Error {}

const require = createRequire(import.meta.url);
const GLUE = require.resolve('minijinja-js');
const GLUE_SOURCE = readFileSync(GLUE, 'utf8');
const WASM = capMemory(readFileSync(join(dirname(GLUE), 'minijinja_js_bg.wasm')), MAX_MEMORY_PAGES);

/** WebAssembly is not in the type libraries this project compiles with: what is used of it. */
interface WebAssemblyApi {
  Module: new (bytes: Uint8Array) => object;
}
const wasmApi = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;
/**
 * Compiled once: every instance shares the machine code (and V8's tier-up of it), so a fresh
 * instance renders as fast as the one it replaces instead of compiling its functions again.
 */
let compiled: object | null = null;
const sharedWebAssembly = Object.create(wasmApi, {
  Module: {
    value: function SharedModule(): object {
      compiled ??= new wasmApi.Module(WASM);
      return compiled;
    },
  },
}) as WebAssemblyApi;

interface Instance {
  module: MiniJinja;
  /** From now on the instance's finalizers do nothing: its memory is discarded whole. */
  retire(): void;
}

export class TemplateEngine {
  private current: Instance = load();
  private generation = 0;
  /** Runs `run()` under vm's watchdog, which can stop WebAssembly as well as script. */
  private readonly watchdog = vm.createContext(Object.create(null) as Record<string, unknown>);
  private readonly call = new vm.Script('run()');

  constructor() {
    warmUp(this.current.module);
  }

  get module(): MiniJinja {
    return this.current.module;
  }

  /** How many times the engine was replaced: an environment made before a replacement is dead. */
  get replacements(): number {
    return this.generation;
  }

  /**
   * A new instance for every render from now on; environments of the old one must not be used
   * again. It is warmed here, unbounded, so that what its first use costs beyond rendering (a
   * garbage collection of the old instance's memory, say) is not counted against a template.
   */
  replace(): void {
    this.current.retire();
    this.current = load();
    this.generation += 1;
    try {
      warmUp(this.current.module);
    } catch {
      // A fresh instance that cannot render the warm-up fails its first call too, and is replaced then.
    }
  }

  /**
   * Runs `fn` (one call into the engine), stopped after `ms` of wall-clock time with an
   * EngineOverrun. Whatever `fn` throws passes through unchanged.
   */
  run<T>(fn: () => T, ms: number): T {
    this.watchdog.run = fn;
    try {
      return this.call.runInContext(this.watchdog, { timeout: Math.max(1, Math.ceil(ms)) }) as T;
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw new EngineOverrun(`engine call stopped after ${ms} ms`);
      throw err;
    } finally {
      this.watchdog.run = undefined;
    }
  }
}

/**
 * V8 compiles WebAssembly functions on their first call: the first template of a process would
 * spend tens of milliseconds compiling the engine, against its time bound. So the common paths
 * (lexer, parser, code generator, loops, filters, escaping, globals, errors) run once here, without
 * a bound; instances made later share the compiled code.
 */
function warmUp(minijinja: MiniJinja): void {
  const env = new minijinja.Environment();
  try {
    // Enough for the template below; the loop past it warms the out-of-fuel path quickly.
    env.fuel = 5_000;
    env.addGlobal('site', { name: 'Example', links: ['a', 'b'] });
    env.addTemplate('warm.html', WARM_UP_TEMPLATE);
    env.addTemplate('warm.txt', WARM_UP_TEMPLATE);
    const context = {
      name: '<Ada>',
      n: 3,
      price: 9.5,
      vip: true,
      user: { first: 'Ada', tags: ['x', 'y'] },
      items: [
        { name: 'a', qty: 1 },
        { name: 'b', qty: 2 },
      ],
    };
    env.renderTemplate('warm.html', context);
    env.renderTemplate('warm.txt', context);
    for (const broken of ['{{ missing.attribute }}', '{{ 1 + }}', '{% for i in range(100000) %}{% endfor %}']) {
      try {
        env.renderStr(broken, {});
      } catch {
        // The error paths are what is warmed here.
      }
    }
  } finally {
    env.free();
  }
}

const WARM_UP_TEMPLATE = `{# warm #}Hello {{ name }} {{ name|default("there")|upper|lower|title|trim|length }} {{ user.first }} {{ user["tags"][1] }}
{% if vip %}VIP{% elif n > 2 %}many{% else %}few{% endif %} {{ price|round(1) }} {{ n * 2 + 1 - 1 }} {{ "a" ~ name ~ "b" }} {{ n is even }}
{% for item in items %}{{ loop.index }}. {{ item.name|e }} x{{ item.qty }}{% if not loop.last %}, {% endif %}{% else %}none{% endfor %}
{% set total = items|map(attribute="qty")|sum %}{{ total }} {{ items|length }} {{ site.links|join(", ") }} {{ site.name|replace("E", "e") }}
{% macro row(label, value) %}<td>{{ label }}</td><td>{{ value }}</td>{% endmacro %}{{ row("a", name) }} {{ name|safe }} {{ user|tojson }}
{% for k, v in user|items %}{{ k }}={{ v }} {% endfor %}{{ range(3)|list|first }} {{ "%s"|format(name) if false else name|capitalize }}`;

/** Evaluates the CommonJS glue as Node would, but reading our capped module bytes. */
function load(): Instance {
  let retired = false;
  /** The glue's registry frees environments the program dropped; never in a retired instance, never throwing. */
  class GuardedRegistry<T> extends FinalizationRegistry<T> {
    constructor(cleanup: (held: T) => void) {
      super((held) => {
        if (retired) return;
        try {
          cleanup(held);
        } catch {
          // An exception here would be an uncaught exception of the process: nothing to free.
        }
      });
    }
  }
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
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- that loader, evaluated as the CommonJS module it is
  const evaluate = new Function('module', 'exports', 'require', '__dirname', '__filename', 'FinalizationRegistry', 'WebAssembly', GLUE_SOURCE) as (
    m: typeof module,
    e: typeof module.exports,
    r: typeof glueRequire,
    d: string,
    f: string,
    registry: typeof FinalizationRegistry,
    webAssembly: WebAssemblyApi,
  ) => void;
  evaluate(module, module.exports, glueRequire, dirname(GLUE), GLUE, GuardedRegistry, sharedWebAssembly);
  return {
    module: module.exports as unknown as MiniJinja,
    retire: () => {
      retired = true;
    },
  };
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
      return Buffer.concat([wasm.subarray(0, sectionStart), Buffer.from([5]), encodeLeb(content.length), content, wasm.subarray(contentStart + size)]);
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
