import mj from 'minijinja-js';

/** The fields a template set renders; names end in `.html` where MiniJinja should autoescape. */
export interface TemplateSources {
  subject: string;
  text?: string | undefined;
  html?: string | undefined;
  amp?: string | undefined;
}
export type Rendered = TemplateSources;

const NAMES = { subject: 'subject', text: 'text_content', html: 'html_content.html', amp: 'amp_content.html' } as const;
type Field = keyof typeof NAMES;

/** A template or substitution problem; the message is the first line of MiniJinja's report. */
export class TemplateError extends Error {}

/**
 * The templates of one send request, compiled once (syntax errors surface here, for the whole
 * request) and rendered per recipient (runtime errors belong to that recipient). MiniJinja
 * semantics: undefined variables render empty, `{{ x.y }}` on an undefined `x` is an error, and
 * HTML and AMP bodies autoescape substituted values (`|safe` opts out).
 */
export class TemplateSet {
  private readonly env = new mj.Environment();
  private readonly fields: Field[] = [];

  constructor(sources: TemplateSources) {
    try {
      for (const field of Object.keys(NAMES) as Field[]) {
        const source = sources[field];
        if (source === undefined) continue;
        this.env.addTemplate(NAMES[field], source);
        this.fields.push(field);
      }
    } catch (err) {
      this.dispose();
      throw new TemplateError(`template error: ${firstLine(err)}`);
    }
  }

  render(context: Record<string, unknown>): Rendered {
    const out: Rendered = { subject: '' };
    for (const field of this.fields) {
      try {
        out[field] = this.env.renderTemplate(NAMES[field], context);
      } catch (err) {
        throw new TemplateError(`template error: ${firstLine(err)}`);
      }
    }
    return out;
  }

  /** Releases the WebAssembly side of the environment. */
  dispose(): void {
    this.env.free();
  }
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
