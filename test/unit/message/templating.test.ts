import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { checkSubstitutions, substitutionsProblem, TEMPLATE_LIMITS, TemplateError, TemplateRefused, TemplateSet, type TemplateSources } from '../../../src/message/templating.ts';
import { capMemory, MAX_MEMORY_PAGES, TemplateEngine } from '../../../src/message/template-engine.ts';

const engine = new TemplateEngine();

/** Builds a set, runs `fn` with it and frees it. */
function withSet<T>(sources: TemplateSources, fn: (set: TemplateSet) => T): T {
  const set = new TemplateSet(engine, sources);
  try {
    return fn(set);
  } finally {
    set.dispose();
  }
}

function templateErrorOf(fn: () => unknown): TemplateError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(TemplateError);
    return err as TemplateError;
  }
  throw new Error('expected a TemplateError');
}

describe('TemplateSet', () => {
  it('renders subject, text, HTML and AMP with the context', () => {
    const out = withSet(
      { subject: 'Hi {{ name }}', text: 'Dear {{ name }}', html: '<p>{{ name }}</p>', amp: '<b>{{ name }}</b>' },
      (set) => set.render({ name: 'Ada' }),
    );
    expect(out).to.deep.equal({ subject: 'Hi Ada', text: 'Dear Ada', html: '<p>Ada</p>', amp: '<b>Ada</b>' });
  });

  it('renders only the fields it was given', () => {
    const out = withSet({ subject: 'S {{ n }}', html: '<i>{{ n }}</i>' }, (set) => set.render({ n: 1 }));
    expect(out).to.deep.equal({ subject: 'S 1', html: '<i>1</i>' });
    expect(out).to.not.have.property('text');
  });

  it('autoescapes substituted values in HTML and AMP, not in subject and text', () => {
    const value = '<script>&"\'';
    const out = withSet({ subject: '{{ v }}', text: '{{ v }}', html: '{{ v }}', amp: '{{ v }}' }, (set) => set.render({ v: value }));
    expect(out.subject).to.equal(value);
    expect(out.text).to.equal(value);
    expect(out.html).to.not.include('<script>');
    expect(out.html).to.include('&lt;script&gt;&amp;');
    expect(out.amp).to.include('&lt;script&gt;&amp;');
  });

  it('lets |safe opt out of HTML escaping', () => {
    const out = withSet({ subject: 's', html: '{{ v|safe }}' }, (set) => set.render({ v: '<b>bold</b>' }));
    expect(out.html).to.equal('<b>bold</b>');
  });

  it('leaves markup written in the template itself alone', () => {
    const out = withSet({ subject: 's', html: '<a href="https://x.example/{{ id }}">go</a>' }, (set) => set.render({ id: 7 }));
    expect(out.html).to.equal('<a href="https://x.example/7">go</a>');
  });

  it('renders undefined variables as empty', () => {
    expect(withSet({ subject: 'Hi {{ missing }}!' }, (set) => set.render({})).subject).to.equal('Hi !');
  });

  it('supports Jinja filters, conditions and loops', () => {
    const out = withSet(
      { subject: '{{ name|default("friend")|upper }}', text: '{% if vip %}VIP {% endif %}{% for i in items %}[{{ i }}]{% endfor %}' },
      (set) => set.render({ vip: true, items: ['a', 'b'] }),
    );
    expect(out).to.deep.equal({ subject: 'FRIEND', text: 'VIP [a][b]' });
  });

  it('renders nested objects from the context', () => {
    expect(withSet({ subject: '{{ user.first }} {{ user.tags[1] }}' }, (set) => set.render({ user: { first: 'Ada', tags: ['x', 'y'] } })).subject)
      .to.equal('Ada y');
  });

  it('renders many times from one compilation with independent contexts', () => {
    withSet({ subject: '{{ n }}' }, (set) => {
      expect(set.render({ n: 1 }).subject).to.equal('1');
      expect(set.render({ n: 2 }).subject).to.equal('2');
      expect(set.render({}).subject).to.equal('');
    });
  });

  it('reports a syntax error when built, naming the field', () => {
    const err = templateErrorOf(() => new TemplateSet(engine, { subject: 'ok', html: '<p>{{ name </p>' }));
    expect(err.message).to.match(/^template error: /);
    expect(err.message).to.include('html_content');
    expect(err.message).to.not.include('\n');
  });

  it('reports an unclosed block as a syntax error', () => {
    templateErrorOf(() => new TemplateSet(engine, { subject: '{% if x %}never closed' }));
  });

  it('reports a runtime error at render time only, for that context', () => {
    withSet({ subject: 's', text: '{{ user.name }}' }, (set) => {
      expect(set.render({ user: { name: 'Ada' } }).text).to.equal('Ada');
      const err = templateErrorOf(() => set.render({}));
      expect(err.message).to.match(/^template error: .*text_content/);
      expect(set.render({ user: { name: 'Bob' } }).text).to.equal('Bob');
    });
  });

  it('reports an invalid operation as a runtime error', () => {
    withSet({ subject: '{{ a / b }}' }, (set) => {
      templateErrorOf(() => set.render({ a: 1, b: 'x' }));
    });
  });
});

describe('checkSubstitutions', () => {
  it('accepts plain data of every JSON kind', () => {
    expect(() => checkSubstitutions({ s: 'text with { and } and %', n: 1, b: true, z: null, a: [1, 'x'], o: { p: 'q' } })).to.not.throw();
  });

  for (const marker of ['{{', '{%', '{#']) {
    it(`refuses a value holding ${marker}`, () => {
      const err = templateErrorOf(() => checkSubstitutions({ name: `x ${marker} y` }));
      expect(err.message).to.include('substitutions.name');
    });
  }

  it('finds template syntax deep inside objects and arrays and names the path', () => {
    const err = templateErrorOf(() => checkSubstitutions({ a: ['ok', { b: '{{ evil }}' }] }));
    expect(err.message).to.include('substitutions.a[1].b');
  });

  it('uses the given path prefix', () => {
    expect(templateErrorOf(() => checkSubstitutions({ x: '{{' }, 'recipients[3].substitutions')).message).to.include('recipients[3].substitutions.x');
  });

  it('lets braces that are not template syntax through', () => {
    expect(() => checkSubstitutions({ json: '{"a": {"b": 1}}', set: '{ a }' })).to.not.throw();
  });
});

describe('template bounds and engine failures', () => {
  /** How long `fn` takes, in ms. */
  function timed(fn: () => void): number {
    const started = performance.now();
    fn();
    return performance.now() - started;
  }

  it('refuses nested loops past the fuel budget, within a few milliseconds', () => {
    const subject = '{% for a in range(4000) %}{% for b in range(4000) %}x{% endfor %}{% endfor %}';
    let caught: unknown;
    const ms = timed(() => {
      try {
        withSet({ subject }, (set) => set.render({}));
      } catch (err) {
        caught = err;
      }
    });
    expect(caught).to.be.instanceOf(TemplateRefused);
    expect((caught as Error).message).to.equal('template error: the template exceeds its evaluation budget (loops too long)');
    console.log(`      (nested range(4000) loops refused after ${ms.toFixed(1)} ms)`);
  });

  it('refuses a rendering larger than the output bound', () => {
    expect(() => withSet({ subject: 'x', text: '{{ "ab" * 2000000 }}' }, (set) => set.render({}))).to.throw(TemplateRefused, /text_content renders to more than/);
  });

  it('refuses a templated field larger than the source bound before compiling it', () => {
    const html = 'x'.repeat(TEMPLATE_LIMITS.sourceChars + 1);
    expect(() => new TemplateSet(engine, { subject: 'x', html })).to.throw(TemplateRefused, /html_content is too large to be a template/);
  });

  it('turns a string amplified past the memory cap into a refusal, replaces the engine, and renders the next request', () => {
    const own = new TemplateEngine();
    const before = own.replacements;
    // Doubling a string 40 times wants a terabyte: the capped memory traps long before.
    const bomb = '{% set ns = namespace(s="xxxxxxxx") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}';
    let caught: unknown;
    const ms = timed(() => {
      const set = new TemplateSet(own, { subject: bomb });
      try {
        set.render({});
      } catch (err) {
        caught = err;
      } finally {
        set.dispose();
      }
    });
    expect(caught, String(caught)).to.be.instanceOf(TemplateRefused);
    expect((caught as Error).message).to.not.match(/memory|unreachable|RuntimeError/i);
    expect(own.replacements).to.equal(before + 1);
    console.log(`      (amplification stopped after ${ms.toFixed(1)} ms)`);
    const next = new TemplateSet(own, { subject: 'Hello {{ name }}' });
    expect(next.render({ name: 'Ada' }).subject).to.equal('Hello Ada');
    next.dispose();
  });

  it('replaces an engine whose instance trapped, so later renders work (the bug: every later send got memory access out of bounds)', () => {
    const own = new TemplateEngine();
    // Deep values overflow the glue's recursive conversion: the failure mode of the review.
    let deep: unknown = 'x';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const set = new TemplateSet(own, { subject: '{{ v }}' });
    expect(() => set.render({ v: deep })).to.throw(TemplateRefused, /^template error: the template could not be rendered$/);
    set.dispose();
    expect(own.replacements).to.equal(1);
    for (let i = 0; i < 3; i++) {
      const again = new TemplateSet(own, { subject: 'Hi {{ name }}', html: '<p>{{ name }}</p>' });
      expect(again.render({ name: '<b>' })).to.deep.equal({ subject: 'Hi <b>', html: '<p>&lt;b&gt;</p>' });
      again.dispose();
    }
  });

  it('caps the WebAssembly memory of the engine', () => {
    const instanceMemory = (new TemplateEngine().module as unknown as { __wasm: { memory: { buffer: ArrayBuffer; grow(n: number): number } } }).__wasm.memory;
    const pages = instanceMemory.buffer.byteLength / 65536;
    expect(() => instanceMemory.grow(MAX_MEMORY_PAGES - pages + 1)).to.throw(RangeError);
    expect(instanceMemory.grow(1)).to.equal(pages);
  });

  it('rewrites a memory limit that is already set to the lower cap', () => {
    const capped = capMemory(readFileSync(wasmPath()), 64);
    expect(capMemory(capped, 32).length).to.equal(capped.length);
  });

  it('bounds substitutions by depth and size, without recursion', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 10_000; i++) deep = { a: deep };
    expect(substitutionsProblem({ deep })).to.equal('nested more than 8 levels deep');
    expect(substitutionsProblem({ big: 'x'.repeat(70_000) })).to.equal('larger than 64 KiB as JSON');
    expect(substitutionsProblem({ bad: 'a\ud800b' })).to.match(/bad: must be valid Unicode text/);
    expect(substitutionsProblem({ ok: { a: [1, 2, { b: 'c' }] } })).to.equal(null);
  });
});

function wasmPath(): string {
  return join(dirname(createRequire(import.meta.url).resolve('minijinja-js')), 'minijinja_js_bg.wasm');
}
