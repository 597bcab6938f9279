import { findJsonProblem } from '../util/json-limits.ts';
import type { MiniJinja, TemplateEngine } from './template-engine.ts';

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

/** A template or substitution problem; the message is the first line of MiniJinja's report. */
export class TemplateError extends Error {}

/**
 * The request's templates cannot be rendered at all: over a bound, or the engine failed inside.
 * Refuses the whole request (400), where a TemplateError belongs to one recipient.
 */
export class TemplateRefused extends Error {}

/**
 * Bounds of one request's templating. Fuel is MiniJinja's instruction budget: 100,000 is about
 * 3 ms of rendering here (nested loops over range(4000) stop after it). The output of a field and
 * the time of all of a request's renders are bounded too, since text can grow faster than fuel.
 */
export const TEMPLATE_LIMITS = {
  fuel: 100_000,
  /** A templated field's source, in characters. */
  sourceChars: 1024 * 1024,
  /** A rendered field, in characters. */
  outputChars: 2 * 1024 * 1024,
  /** All renders of one request together (up to 100 recipients × 4 fields). */
  requestMs: 100,
} as const;

/** Substitution values: how deep and how large (as JSON) each substitutions object may be. */
export const SUBSTITUTION_LIMITS = { depth: 8, bytes: 64 * 1024 } as const;

/**
 * The templates of one send request, compiled once (syntax errors surface here, for the whole
 * request) and rendered per recipient (runtime errors belong to that recipient). MiniJinja
 * semantics: undefined variables render empty, `{{ x.y }}` on an undefined `x` is an error, and
 * HTML and AMP bodies autoescape substituted values (`|safe` opts out).
 *
 * Any failure that is not MiniJinja's own diagnostic (a WebAssembly trap, a stack overflow in the
 * glue) replaces the engine, so that the next request of any tenant gets a sound one, and refuses
 * this request with our own words: internal texts are never shown to clients.
 */
export class TemplateSet {
  private readonly env: InstanceType<MiniJinja['Environment']>;
  private readonly fields: Field[] = [];
  private spentMs = 0;
  private broken = false;

  constructor(
    private readonly engine: TemplateEngine,
    sources: TemplateSources,
  ) {
    for (const field of Object.keys(NAMES) as Field[]) {
      const source = sources[field];
      if (source !== undefined && source.length > TEMPLATE_LIMITS.sourceChars) {
        throw new TemplateRefused(`${FIELD_NAMES[field]} is too large to be a template (at most ${TEMPLATE_LIMITS.sourceChars} characters when substitutions are given)`);
      }
    }
    this.env = this.guard(() => new engine.module.Environment());
    try {
      this.env.fuel = TEMPLATE_LIMITS.fuel;
      for (const field of Object.keys(NAMES) as Field[]) {
        const source = sources[field];
        if (source === undefined) continue;
        this.guard(() => this.env.addTemplate(NAMES[field], source));
        this.fields.push(field);
      }
    } catch (err) {
      this.dispose();
      throw err;
    }
  }

  render(context: Record<string, unknown>): Rendered {
    const out: Rendered = { subject: '' };
    for (const field of this.fields) {
      const started = performance.now();
      const text = this.guard(() => this.env.renderTemplate(NAMES[field], context));
      this.spentMs += performance.now() - started;
      if (text.length > TEMPLATE_LIMITS.outputChars) {
        throw new TemplateRefused(`template error: ${FIELD_NAMES[field]} renders to more than ${TEMPLATE_LIMITS.outputChars} characters`);
      }
      if (this.spentMs > TEMPLATE_LIMITS.requestMs) throw new TemplateRefused('template error: the templates exceed their evaluation budget');
      out[field] = text;
    }
    return out;
  }

  /** Releases the WebAssembly side of the environment (not after a failure: the instance is gone). */
  dispose(): void {
    if (this.broken) return;
    try {
      this.env.free();
    } catch {
      // An environment of an instance that failed since: nothing left to release.
    }
  }

  /** Runs one engine call, sorting its failures into ours. */
  private guard<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (isDiagnostic(err)) {
        const text = firstLine(err);
        if (/ran out of fuel/.test(text)) throw new TemplateRefused('template error: the template exceeds its evaluation budget (loops too long)');
        throw new TemplateError(`template error: ${text}`);
      }
      this.broken = true;
      this.engine.replace();
      throw new TemplateRefused('template error: the template could not be rendered');
    }
  }
}

/** MiniJinja's own reports come as plain Errors; traps and stack overflows are the engine failing. */
function isDiagnostic(err: unknown): err is Error {
  // WebAssembly.RuntimeError is not in the type libraries this project compiles with: by name.
  return err instanceof Error && err.constructor.name !== 'RuntimeError' && !(err instanceof RangeError) && !/memory access out of bounds|unreachable/i.test(err.message);
}

/** What a substitutions object breaks, if anything: checked before anything walks it recursively. */
export function substitutionsProblem(values: Record<string, unknown>): string | null {
  const found = findJsonProblem(values, SUBSTITUTION_LIMITS.depth);
  if (found?.problem === 'depth') return `nested more than ${SUBSTITUTION_LIMITS.depth} levels deep`;
  if (found?.problem === 'unicode') return `${found.path}: must be valid Unicode text (it holds an unpaired surrogate)`;
  if (Buffer.byteLength(JSON.stringify(values)) > SUBSTITUTION_LIMITS.bytes) return `larger than ${SUBSTITUTION_LIMITS.bytes / 1024} KiB as JSON`;
  return null;
}

/**
 * Substitution values must be data, not templates: a string holding `{{`, `{%` or `{#` is
 * refused (it would otherwise look like an injection attempt when rendered elsewhere).
 */
export function checkSubstitutions(values: unknown, path = 'substitutions'): void {
  if (typeof values === 'string') {
    if (/\{[{%#]/.test(values)) throw new TemplateError(`${path} must not contain template syntax ({{, {% or {#)`);
    return;
  }
  if (Array.isArray(values)) {
    values.forEach((v, i) => checkSubstitutions(v, `${path}[${i}]`));
    return;
  }
  if (values !== null && typeof values === 'object') {
    for (const [key, v] of Object.entries(values)) checkSubstitutions(v, `${path}.${key}`);
  }
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n', 1)[0]!.trim();
}
