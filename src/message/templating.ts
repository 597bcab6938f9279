import { setImmediate } from 'node:timers/promises';
import { findJsonProblem } from '../util/json-limits.ts';
import { EngineOverrun, type MiniJinja, type TemplateEngine } from './template-engine.ts';

/** The fields a template set renders; names end in `.html` where MiniJinja should autoescape. */
export interface TemplateSources {
  subject: string;
  text?: string | undefined;
  html?: string | undefined;
  amp?: string | undefined;
}
export type Rendered = TemplateSources;

const NAMES = { subject: 'subject', text: 'text_content', html: 'html_content.html', amp: 'amp_content.html' } as const;
const FIELD_NAMES = { subject: 'subject', text: 'text_content', html: 'html_content', amp: 'amp_content' } as const;
type Field = keyof typeof NAMES;
type Environment = InstanceType<MiniJinja['Environment']>;

/** A template or substitution problem of one recipient; the message is MiniJinja's diagnostic or ours. */
export class TemplateError extends Error {}

/**
 * The request's templates cannot be rendered at all: over a bound, or the engine failed inside.
 * Refuses the whole request (400), where a TemplateError belongs to one recipient.
 */
export class TemplateRefused extends Error {}

/**
 * Bounds of one request's templating. Fuel is MiniJinja's instruction budget per field: 100,000 is
 * a few milliseconds of rendering (nested loops over range(4000) stop after it). One instruction
 * can still be a filter over megabytes, so time in the engine is bounded too: per step (compiling
 * one field, or rendering one recipient's fields, each one call under the watchdog) and per
 * request; between recipients the sender yields to the event loop. Output is bounded per field and per request, since text can grow
 * faster than fuel.
 */
export const TEMPLATE_LIMITS = {
  fuel: 100_000,
  /** A templated field's source, in characters. */
  sourceChars: 1024 * 1024,
  /** A rendered body (text, HTML, AMP), in characters. */
  outputChars: 2 * 1024 * 1024,
  /** A rendered subject, in characters: what the API takes as a literal subject. */
  subjectChars: 998,
  /** Everything one request renders (up to 100 recipients × 4 fields), in characters. */
  requestOutputChars: 32 * 1024 * 1024,
  /**
   * One step in the engine, wall clock: compiling one field, or rendering one recipient's fields.
   * Sound templates take well under a millisecond to a few; the margin is for garbage-collection
   * pauses and a busy machine (and a step stopped once in a request runs again).
   */
  stepMs: 50,
  /** All steps of one request together, wall clock. */
  requestMs: 1000,
} as const;
export type TemplateLimits = { readonly [K in keyof typeof TEMPLATE_LIMITS]: number };

/**
 * Substitution values: how deep and how large (as JSON) each substitutions object may be, and all
 * of a request's together (global and every recipient's).
 */
export const SUBSTITUTION_LIMITS = { depth: 8, bytes: 64 * 1024, requestBytes: 1024 * 1024 } as const;

const OUT_OF_FUEL = 'template error: the template exceeds its evaluation budget (loops too long)';
const TOO_SLOW = 'template error: the template exceeds its evaluation budget (it takes too long to render)';
const REQUEST_BUDGET = 'template error: the templates exceed their evaluation budget';
const ENGINE_FAILED = 'template error: the template could not be rendered';

/** What the engine failure was, for a log line: never shown to clients. */
export type EngineFailureReport = (err: unknown) => void;

export interface TemplateSetOptions {
  /**
   * Values every render sees (the request's global substitutions), converted into the engine once
   * rather than once per render; a render's own context shadows them by name.
   */
  globals?: Record<string, unknown> | undefined;
  /** Told of failures inside the engine. */
  report?: EngineFailureReport | undefined;
  limits?: TemplateLimits | undefined;
}

/**
 * The templates of one send request, compiled once (syntax errors surface here, for the whole
 * request) and rendered per recipient (runtime errors belong to that recipient). MiniJinja
 * semantics: undefined variables render empty, `{{ x.y }}` on an undefined `x` is an error, and
 * HTML and AMP bodies autoescape substituted values (`|safe` opts out).
 *
 * Any failure that is not MiniJinja's own diagnostic (a WebAssembly trap, a stack overflow in the
 * glue, a call stopped at its time bound) replaces the engine, so that the next request of any
 * tenant gets a sound one, and refuses this request with our own words: internal texts are never
 * shown to clients (`report` gets them). A set whose engine was replaced since (by another
 * request's failure) compiles again on the new one before it renders.
 */
export class TemplateSet {
  private env: Environment | null = null;
  /** The engine generation `env` belongs to. */
  private generation = -1;
  private readonly fields: Field[] = [];
  private spentMs = 0;
  /** Time left to the step under way. */
  private stepLeftMs = 0;
  private outputChars = 0;
  /** Whether a step already ran again after a stop at its time bound. */
  private retried = false;
  private readonly globals: Record<string, unknown>;
  private readonly report: EngineFailureReport;
  private readonly limits: TemplateLimits;

  /** Checks and compiles the templates: a TemplateError (syntax) or TemplateRefused refuses the request. */
  static async compile(engine: TemplateEngine, sources: TemplateSources, options: TemplateSetOptions = {}): Promise<TemplateSet> {
    const set = new TemplateSet(engine, sources, options);
    await set.step(() => set.build());
    return set;
  }

  private constructor(
    private readonly engine: TemplateEngine,
    private readonly sources: TemplateSources,
    options: TemplateSetOptions,
  ) {
    this.globals = options.globals ?? {};
    this.report = options.report ?? (() => {});
    this.limits = options.limits ?? TEMPLATE_LIMITS;
    const found = findJsonProblem(this.globals, SUBSTITUTION_LIMITS.depth);
    if (found) throw new TemplateRefused(contextProblem(found.problem));
    for (const field of Object.keys(NAMES) as Field[]) {
      const source = sources[field];
      if (source === undefined) continue;
      if (source.length > this.limits.sourceChars) {
        throw new TemplateRefused(
          `${FIELD_NAMES[field]} is too large to be a template (at most ${this.limits.sourceChars} characters when substitutions are given)`,
        );
      }
      this.fields.push(field);
    }
  }

  /** One recipient's fields: a TemplateError belongs to that recipient, a TemplateRefused to the request. */
  async render(context: Record<string, unknown>): Promise<Rendered> {
    // The glue converts the context recursively: its depth is bounded before it gets there.
    const found = findJsonProblem(context, SUBSTITUTION_LIMITS.depth);
    if (found) throw new TemplateError(contextProblem(found.problem));
    return this.step(() => {
      if (this.generation !== this.engine.replacements) this.build();
      const env = this.env!;
      this.stepLeftMs = this.limits.stepMs;
      // One bounded call for all fields: the watchdog costs a thread start per call.
      const texts = this.call(() => this.fields.map((field) => env.renderTemplate(NAMES[field], context)));
      const out: Rendered = { subject: '' };
      let chars = 0;
      this.fields.forEach((field, i) => {
        const text = texts[i]!;
        if (field === 'subject' && text.length > this.limits.subjectChars) {
          throw new TemplateError(`template error: subject renders to more than ${this.limits.subjectChars} characters`);
        }
        if (text.length > this.limits.outputChars) {
          throw new TemplateRefused(`template error: ${FIELD_NAMES[field]} renders to more than ${this.limits.outputChars} characters`);
        }
        chars += text.length;
        out[field] = text;
      });
      this.outputChars += chars;
      if (this.outputChars > this.limits.requestOutputChars) {
        throw new TemplateRefused(`template error: the templates render to more than ${this.limits.requestOutputChars} characters in all`);
      }
      return out;
    });
  }

  /** Releases the WebAssembly side of the environment (not one of a replaced instance: it is gone whole). */
  dispose(): void {
    const env = this.env;
    this.env = null;
    if (env === null || this.generation !== this.engine.replacements) return;
    try {
      env.free();
    } catch {
      // Nothing left to release.
    }
  }

  /** A fresh environment on the engine's current instance, with the globals and every field compiled. */
  private build(): void {
    this.env = null;
    const module = this.engine.module;
    const generation = this.engine.replacements;
    this.stepLeftMs = this.limits.stepMs;
    const env = this.call(() => {
      const made = new module.Environment();
      made.fuel = this.limits.fuel;
      try {
        for (const [name, value] of Object.entries(this.globals)) made.addGlobal(name, value);
      } catch (err) {
        try {
          made.free();
        } catch {
          // A failure inside the engine: the instance goes whole.
        }
        throw err;
      }
      return made;
    });
    this.env = env;
    this.generation = generation;
    try {
      for (const field of this.fields) {
        this.stepLeftMs = this.limits.stepMs;
        this.call(() => env.addTemplate(NAMES[field], this.sources[field]!));
      }
    } catch (err) {
      this.dispose();
      throw err;
    }
  }

  /**
   * Runs a step (compiling, or rendering one recipient). The first time a call of the request is
   * stopped at its time bound, the step runs once more on a fresh instance, after the event loop
   * had its turn: a garbage-collection pause or a busy machine can stop a sound template, but not
   * twice in one request. So no step holds the event loop longer than `stepMs`.
   */
  private async step<T>(run: () => T): Promise<T> {
    try {
      return run();
    } catch (err) {
      if (!(err instanceof Overrun)) throw err;
      if (this.retried) throw new TemplateRefused(err.message);
      this.retried = true;
    }
    await yieldToEventLoop();
    try {
      return run();
    } catch (err) {
      if (err instanceof Overrun) throw new TemplateRefused(err.message);
      throw err;
    }
  }

  /** Runs one engine call within the time left to the step and the request, sorting its failures into ours. */
  private call<T>(fn: () => T): T {
    const requestLeft = this.limits.requestMs - this.spentMs;
    const budget = Math.min(this.stepLeftMs, requestLeft);
    const overrun = requestLeft <= this.stepLeftMs ? REQUEST_BUDGET : TOO_SLOW;
    if (budget <= 0) throw overrun === REQUEST_BUDGET ? new TemplateRefused(overrun) : new Overrun(overrun);
    const started = performance.now();
    try {
      return this.engine.run(fn, budget);
    } catch (err) {
      if (isDiagnostic(err)) {
        const text = firstLine(err);
        if (text.startsWith('engine ran out of fuel')) throw new TemplateRefused(OUT_OF_FUEL);
        throw new TemplateError(`template error: ${text}`);
      }
      // Stopped or failed inside: the instance is in an unknown state either way.
      this.engine.replace();
      this.report(err);
      if (err instanceof EngineOverrun) throw overrun === REQUEST_BUDGET ? new TemplateRefused(overrun) : new Overrun(overrun);
      throw new TemplateRefused(ENGINE_FAILED);
    } finally {
      const spent = performance.now() - started;
      this.spentMs += spent;
      this.stepLeftMs -= spent;
    }
  }
}

/** A call stopped at the step's time bound: the step may run once more (see TemplateSet.step). */
class Overrun extends Error {}

/**
 * Lets the event loop take a full turn (timers and I/O of other requests) before going on: an
 * immediate queued from an immediate waits for the next turn's poll phase.
 */
export async function yieldToEventLoop(): Promise<void> {
  await setImmediate();
  await setImmediate();
}

function contextProblem(problem: 'depth' | 'unicode'): string {
  return problem === 'depth'
    ? `substitutions: nested more than ${SUBSTITUTION_LIMITS.depth} levels deep`
    : 'substitutions: must be valid Unicode text (it holds an unpaired surrogate)';
}

/** The kinds MiniJinja reports (minijinja ErrorKind); a message starting otherwise is not its diagnostic. */
const MINIJINJA_KINDS = new RegExp(
  '^(?:' +
    [
      'not a primitive',
      'not a key type',
      'invalid operation',
      'syntax error',
      'template not found',
      'too many arguments',
      'missing argument',
      'unknown filter',
      'unknown test',
      'unknown function',
      'unknown method',
      'bad string escape',
      'undefined value',
      'could not serialize to value',
      'cannot deserialize',
      'could not render include',
      'could not render block',
      'cannot unpack',
      'failed to write output',
      'engine ran out of fuel',
      'unknown block',
    ].join('|') +
    ')\\b',
);

/**
 * MiniJinja's own reports come as plain Errors starting with the kind of error. Anything else
 * (RuntimeError traps, RangeError stack overflows, wasm-bindgen's "recursive use of an object")
 * is the engine failing.
 */
function isDiagnostic(err: unknown): err is Error {
  return err instanceof Error && err.constructor === Error && MINIJINJA_KINDS.test(err.message);
}

/** What a substitutions object breaks, if anything: checked before anything walks it recursively. */
export function substitutionsProblem(values: Record<string, unknown>): string | null {
  const found = findJsonProblem(values, SUBSTITUTION_LIMITS.depth);
  if (found?.problem === 'depth') return `nested more than ${SUBSTITUTION_LIMITS.depth} levels deep`;
  if (found?.problem === 'unicode') return `${found.path}: must be valid Unicode text (it holds an unpaired surrogate)`;
  if (jsonBytes(values) > SUBSTITUTION_LIMITS.bytes) return `larger than ${SUBSTITUTION_LIMITS.bytes / 1024} KiB as JSON`;
  return null;
}

/** Whether a request's substitutions objects (global and every recipient's) are too large together. */
export function requestSubstitutionsProblem(objects: ReadonlyArray<Record<string, unknown> | undefined>): string | null {
  let bytes = 0;
  for (const values of objects) if (values !== undefined) bytes += jsonBytes(values);
  return bytes > SUBSTITUTION_LIMITS.requestBytes
    ? `substitutions of the request (global and every recipient's) are larger than ${SUBSTITUTION_LIMITS.requestBytes / 1024 / 1024} MiB as JSON together`
    : null;
}

function jsonBytes(values: Record<string, unknown>): number {
  return Buffer.byteLength(JSON.stringify(values));
}

/**
 * Substitution values must be data, not templates: a string holding `{{`, `{%` or `{#` is
 * refused (it would otherwise look like an injection attempt when rendered elsewhere). Walks
 * iteratively, in document order.
 */
export function checkSubstitutions(values: unknown, path = 'substitutions'): void {
  const stack: Array<{ value: unknown; path: string }> = [{ value: values, path }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    const v = item.value;
    if (typeof v === 'string') {
      if (/\{[{%#]/.test(v)) throw new TemplateError(`${item.path} must not contain template syntax ({{, {% or {#)`);
      continue;
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: `${item.path}[${i}]` });
      continue;
    }
    if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) stack.push({ value: entries[i]![1], path: `${item.path}.${entries[i]![0]}` });
    }
  }
}

function firstLine(err: Error): string {
  return err.message.split('\n', 1)[0]!.trim();
}
