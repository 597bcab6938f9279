import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import {
  checkSubstitutions,
  requestSubstitutionsProblem,
  substitutionsProblem,
  TEMPLATE_LIMITS,
  TemplateError,
  TemplateRefused,
  TemplateSet,
  type TemplateSetOptions,
  type TemplateSources,
} from '../../../src/message/templating.ts';
import { capMemory, EngineOverrun, MAX_MEMORY_PAGES, TemplateEngine } from '../../../src/message/template-engine.ts';
import { corrupt } from '../../helpers/template-engine.ts';

const engine = new TemplateEngine();

/** Compiles a set, runs `fn` with it and frees it. */
async function withSet<T>(sources: TemplateSources, fn: (set: TemplateSet) => T | Promise<T>, options?: TemplateSetOptions): Promise<T> {
  const set = await TemplateSet.compile(engine, sources, options);
  try {
    return await fn(set);
  } finally {
    set.dispose();
  }
}

/** What `work` rejects (or throws) with; fails when it succeeds. */
async function failure(work: () => unknown): Promise<Error> {
  try {
    await work();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a failure');
}

async function templateErrorOf(work: () => unknown): Promise<TemplateError> {
  const err = await failure(work);
  expect(err, String(err)).to.be.instanceOf(TemplateError);
  return err;
}

async function refusalOf(work: () => unknown, message?: RegExp): Promise<TemplateRefused> {
  const err = await failure(work);
  expect(err, String(err)).to.be.instanceOf(TemplateRefused);
  if (message) expect(err.message).to.match(message);
  return err;
}

const TOO_SLOW = /^template error: the template exceeds its evaluation budget \(it takes too long to render\)$/;
const ENGINE_FAILED = /^template error: the template could not be rendered$/;

describe('TemplateSet', () => {
  it('renders subject, text, HTML and AMP with the context', async () => {
    const out = await withSet({ subject: 'Hi {{ name }}', text: 'Dear {{ name }}', html: '<p>{{ name }}</p>', amp: '<b>{{ name }}</b>' }, (set) =>
      set.render({ name: 'Ada' }),
    );
    expect(out).to.deep.equal({ subject: 'Hi Ada', text: 'Dear Ada', html: '<p>Ada</p>', amp: '<b>Ada</b>' });
  });

  it('renders only the fields it was given', async () => {
    const out = await withSet({ subject: 'S {{ n }}', html: '<i>{{ n }}</i>' }, (set) => set.render({ n: 1 }));
    expect(out).to.deep.equal({ subject: 'S 1', html: '<i>1</i>' });
    expect(out).to.not.have.property('text');
  });

  it('autoescapes substituted values in HTML and AMP, not in subject and text', async () => {
    const value = '<script>&"\'';
    const out = await withSet({ subject: '{{ v }}', text: '{{ v }}', html: '{{ v }}', amp: '{{ v }}' }, (set) => set.render({ v: value }));
    expect(out.subject).to.equal(value);
    expect(out.text).to.equal(value);
    expect(out.html).to.not.include('<script>');
    expect(out.html).to.include('&lt;script&gt;&amp;');
    expect(out.amp).to.include('&lt;script&gt;&amp;');
  });

  it('lets |safe opt out of HTML escaping', async () => {
    const out = await withSet({ subject: 's', html: '{{ v|safe }}' }, (set) => set.render({ v: '<b>bold</b>' }));
    expect(out.html).to.equal('<b>bold</b>');
  });

  it('leaves markup written in the template itself alone', async () => {
    const out = await withSet({ subject: 's', html: '<a href="https://x.example/{{ id }}">go</a>' }, (set) => set.render({ id: 7 }));
    expect(out.html).to.equal('<a href="https://x.example/7">go</a>');
  });

  it('renders undefined variables as empty', async () => {
    expect((await withSet({ subject: 'Hi {{ missing }}!' }, (set) => set.render({}))).subject).to.equal('Hi !');
  });

  it('supports Jinja filters, conditions and loops', async () => {
    const out = await withSet(
      { subject: '{{ name|default("friend")|upper }}', text: '{% if vip %}VIP {% endif %}{% for i in items %}[{{ i }}]{% endfor %}' },
      (set) => set.render({ vip: true, items: ['a', 'b'] }),
    );
    expect(out).to.deep.equal({ subject: 'FRIEND', text: 'VIP [a][b]' });
  });

  it('renders nested objects from the context', async () => {
    const out = await withSet({ subject: '{{ user.first }} {{ user.tags[1] }}' }, (set) => set.render({ user: { first: 'Ada', tags: ['x', 'y'] } }));
    expect(out.subject).to.equal('Ada y');
  });

  it('renders many times from one compilation with independent contexts', async () => {
    await withSet({ subject: '{{ n }}' }, async (set) => {
      expect((await set.render({ n: 1 })).subject).to.equal('1');
      expect((await set.render({ n: 2 })).subject).to.equal('2');
      expect((await set.render({})).subject).to.equal('');
    });
  });

  it("gives every render the globals, each render's own values shadowing them by name", async () => {
    const globals = { name: 'everyone', site: { name: 'Example', url: 'https://x.example' } };
    await withSet(
      { subject: '{{ name }} at {{ site.name }}', html: '<a href="{{ site.url }}">{{ name }}</a>' },
      async (set) => {
        expect(await set.render({})).to.deep.equal({ subject: 'everyone at Example', html: '<a href="https:&#x2f;&#x2f;x.example">everyone</a>' });
        expect(await set.render({ name: '<Ada>', site: { name: 'Own' } })).to.deep.equal({ subject: '<Ada> at Own', html: '<a href="">&lt;Ada&gt;</a>' });
      },
      { globals },
    );
  });

  it('reports a syntax error when compiled, naming the field', async () => {
    const err = await templateErrorOf(() => TemplateSet.compile(engine, { subject: 'ok', html: '<p>{{ name </p>' }));
    expect(err.message).to.match(/^template error: /);
    expect(err.message).to.include('html_content');
    expect(err.message).to.not.include('\n');
  });

  it('reports an unclosed block as a syntax error', async () => {
    await templateErrorOf(() => TemplateSet.compile(engine, { subject: '{% if x %}never closed' }));
  });

  it('reports a runtime error at render time only, for that context', async () => {
    await withSet({ subject: 's', text: '{{ user.name }}' }, async (set) => {
      expect((await set.render({ user: { name: 'Ada' } })).text).to.equal('Ada');
      const err = await templateErrorOf(() => set.render({}));
      expect(err.message).to.match(/^template error: .*text_content/);
      expect((await set.render({ user: { name: 'Bob' } })).text).to.equal('Bob');
    });
  });

  it('reports an invalid operation as a runtime error', async () => {
    await withSet({ subject: '{{ a / b }}' }, (set) => templateErrorOf(() => set.render({ a: 1, b: 'x' })));
  });
});

describe('checkSubstitutions', () => {
  it('accepts plain data of every JSON kind', () => {
    expect(() => checkSubstitutions({ s: 'text with { and } and %', n: 1, b: true, z: null, a: [1, 'x'], o: { p: 'q' } })).to.not.throw();
  });

  for (const marker of ['{{', '{%', '{#']) {
    it(`refuses a value holding ${marker}`, async () => {
      const err = await templateErrorOf(() => checkSubstitutions({ name: `x ${marker} y` }));
      expect(err.message).to.include('substitutions.name');
    });
  }

  it('finds template syntax deep inside objects and arrays and names the path', async () => {
    const err = await templateErrorOf(() => checkSubstitutions({ a: ['ok', { b: '{{ evil }}' }] }));
    expect(err.message).to.include('substitutions.a[1].b');
  });

  it('names the first offending value in document order', async () => {
    const err = await templateErrorOf(() => checkSubstitutions({ a: [{ b: 'ok' }, '{{ first }}'], c: '{{ second }}' }));
    expect(err.message).to.equal('substitutions.a[1] must not contain template syntax ({{, {% or {#)');
  });

  it('uses the given path prefix', async () => {
    expect((await templateErrorOf(() => checkSubstitutions({ x: '{{' }, 'recipients[3].substitutions'))).message).to.include('recipients[3].substitutions.x');
  });

  it('lets braces that are not template syntax through', () => {
    expect(() => checkSubstitutions({ json: '{"a": {"b": 1}}', set: '{ a }' })).to.not.throw();
  });

  it('walks values nested 100,000 levels without running out of stack', () => {
    let deep: unknown = '{{ x }}';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(() => checkSubstitutions({ deep })).to.throw(TemplateError, /must not contain template syntax/);
  });
});

describe('template bounds and engine failures', () => {
  it('refuses nested loops past the fuel budget, within a few milliseconds', async () => {
    const subject = '{% for a in range(4000) %}{% for b in range(4000) %}x{% endfor %}{% endfor %}';
    await withSet({ subject }, async (set) => {
      const started = performance.now();
      await refusalOf(() => set.render({}), /^template error: the template exceeds its evaluation budget \(loops too long\)$/);
      console.log(`      (nested range(4000) loops refused after ${(performance.now() - started).toFixed(1)} ms, fuel ${TEMPLATE_LIMITS.fuel})`);
    });
  });

  it('refuses a rendering larger than the output bound', async () => {
    await withSet({ subject: 'x', text: '{{ "ab" * 2000000 }}' }, (set) =>
      refusalOf(() => set.render({}), /^template error: text_content renders to more than 2097152 characters$/),
    );
  });

  it('refuses a templated field larger than the source bound before compiling it', async () => {
    const html = 'x'.repeat(TEMPLATE_LIMITS.sourceChars + 1);
    await refusalOf(() => TemplateSet.compile(engine, { subject: 'x', html }), /html_content is too large to be a template/);
  });

  it('turns a string amplified past the memory cap into a refusal, replaces the engine, and renders the next request', async () => {
    const own = new TemplateEngine();
    // 100 MB in one instruction (MiniJinja even folds it while compiling): past the 64 MiB cap, a trap.
    const reported: unknown[] = [];
    const started = performance.now();
    await refusalOf(
      async () => (await TemplateSet.compile(own, { subject: '{{ ("x" * 100000000)|length }}' }, { report: (err) => reported.push(err) })).render({}),
      ENGINE_FAILED,
    );
    console.log(`      (amplification stopped after ${(performance.now() - started).toFixed(1)} ms)`);
    expect(String(reported[0])).to.match(/RuntimeError: unreachable/);
    expect(own.replacements).to.equal(1);
    const next = await TemplateSet.compile(own, { subject: 'Hello {{ name }}' });
    expect((await next.render({ name: 'Ada' })).subject).to.equal('Hello Ada');
    next.dispose();
  });

  it('stops a string doubled in a loop by time or memory, whichever comes first', async () => {
    const own = new TemplateEngine();
    const bomb = '{% set ns = namespace(s="xxxxxxxx") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}';
    const set = await TemplateSet.compile(own, { subject: bomb });
    await refusalOf(
      () => set.render({}),
      /^template error: the template (could not be rendered|exceeds its evaluation budget \(it takes too long to render\))$/,
    );
    expect(own.replacements).to.be.within(1, 2); // trapped, or stopped, run again and stopped again
  });

  it('replaces an engine whose instance trapped, so later renders work (the bug: every later send got memory access out of bounds)', async () => {
    const own = new TemplateEngine();
    corrupt(own);
    const reported: unknown[] = [];
    await refusalOf(() => TemplateSet.compile(own, { subject: '{{ v }}' }, { report: (err) => reported.push(err) }), ENGINE_FAILED);
    expect(own.replacements).to.equal(1);
    // The details go to the report (a log), never into the client's message.
    expect(String(reported[0])).to.match(/RuntimeError: memory access out of bounds/);
    for (let i = 0; i < 3; i++) {
      const again = await TemplateSet.compile(own, { subject: 'Hi {{ name }}', html: '<p>{{ name }}</p>' });
      expect(await again.render({ name: '<b>' })).to.deep.equal({ subject: 'Hi <b>', html: '<p>&lt;b&gt;</p>' });
      again.dispose();
    }
  });

  it('refuses a context nested past the substitution depth before the engine converts it (its conversion recurses)', async () => {
    const own = new TemplateEngine();
    let deep: unknown = 'x';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const set = await TemplateSet.compile(own, { subject: '{{ v }}' });
    const err = await templateErrorOf(() => set.render({ v: deep }));
    expect(err.message).to.equal('substitutions: nested more than 8 levels deep');
    await refusalOf(() => TemplateSet.compile(own, { subject: '{{ v }}' }, { globals: { v: deep } }), /^substitutions: nested more than 8 levels deep$/);
    expect(own.replacements).to.equal(0);
    expect((await set.render({ v: 'ok' })).subject).to.equal('ok');
    set.dispose();
  });

  it('stops a render that runs past its wall-clock bound on little fuel, replaces the engine, and renders the next one', async () => {
    const own = new TemplateEngine();
    // A handful of instructions, each a filter over a megabyte: fuel alone let this run for minutes.
    const slow = '{% for i in range(100000) %}{{ ("x\n" * 100000)|indent(100)|length }}{% endfor %}';
    const set = await TemplateSet.compile(own, { subject: 'x', text: slow });
    const started = performance.now();
    await refusalOf(() => set.render({}), TOO_SLOW);
    console.log(`      (stopped twice in ${(performance.now() - started).toFixed(1)} ms; a step is bounded at ${TEMPLATE_LIMITS.stepMs} ms)`);
    set.dispose();
    expect(own.replacements).to.equal(2); // stopped, run again on a fresh instance, stopped again
    const next = await TemplateSet.compile(own, { subject: 'Hello {{ name }}' });
    expect((await next.render({ name: 'Ada' })).subject).to.equal('Hello Ada');
    next.dispose();
  });

  it('lets the event loop run between a stopped step and its second run', async () => {
    const own = new TemplateEngine();
    const set = await TemplateSet.compile(own, { subject: 'x', text: '{% for i in range(100000) %}{{ ("x " * 500000)|title|length }}{% endfor %}' });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    try {
      await refusalOf(() => set.render({}), TOO_SLOW);
    } finally {
      clearInterval(timer);
    }
    expect(ticks).to.be.above(0);
  });

  it('bounds all engine time of one request together', async () => {
    // About a millisecond a render, each well within its step; a request budget of 150 ms here.
    const limits = { ...TEMPLATE_LIMITS, requestMs: 150 };
    const set = await TemplateSet.compile(new TemplateEngine(), { subject: 'x', text: '{{ (s * 500000)|length }}' }, { limits });
    const err = await failure(async () => {
      for (let renders = 0; renders < 1000; renders++) await set.render({ s: 'x' });
    });
    set.dispose();
    expect(err).to.be.instanceOf(TemplateRefused);
    expect(err.message).to.equal('template error: the templates exceed their evaluation budget');
    expect(TEMPLATE_LIMITS.requestMs).to.equal(1000);
  });

  it("renders one recipient's fields in one call bounded by the step (the watchdog costs a thread start per call)", async () => {
    const calls: Array<{ ms: number; rendered: boolean }> = [];
    const counting = new (class extends TemplateEngine {
      override run<T>(fn: () => T, ms: number): T {
        const result = super.run(fn, ms);
        calls.push({ ms, rendered: Array.isArray(result) });
        return result;
      }
    })();
    const set = await TemplateSet.compile(
      counting,
      { subject: 'a {{ n }}', text: 'b {{ n }}', html: 'c {{ n }}', amp: 'd {{ n }}' },
      { globals: { g: 1, h: 2, i: 3 } },
    );
    // Compiling: one call for the environment and its globals, one a field.
    expect(calls.map((c) => c.rendered)).to.deep.equal([false, false, false, false, false]);
    calls.length = 0;
    expect(await set.render({ n: 1 })).to.deep.equal({ subject: 'a 1', text: 'b 1', html: 'c 1', amp: 'd 1' });
    await set.render({ n: 2 });
    expect(calls).to.deep.equal([
      { ms: TEMPLATE_LIMITS.stepMs, rendered: true },
      { ms: TEMPLATE_LIMITS.stepMs, rendered: true },
    ]);
    set.dispose();
  });

  it('runs a step again on a fresh instance after its first stop at the time bound, once a request (a GC pause must not refuse it)', async () => {
    /** Stops the renders whose number is in `stops` (0 = the first render call). */
    const stopping = (stops: number[]) => {
      let renders = 0;
      return new (class extends TemplateEngine {
        override run<T>(fn: () => T, ms: number): T {
          const result = super.run(fn, ms);
          if (Array.isArray(result) && stops.includes(renders++)) throw new EngineOverrun('stopped');
          return result;
        }
      })();
    };
    const once = stopping([0]);
    const set = await TemplateSet.compile(once, { subject: 'Hi {{ name }}' });
    expect((await set.render({ name: 'Ada' })).subject).to.equal('Hi Ada');
    expect((await set.render({ name: 'Bo' })).subject).to.equal('Hi Bo');
    expect(once.replacements).to.equal(1);
    set.dispose();
    const twice = stopping([0, 1]);
    await refusalOf(async () => (await TemplateSet.compile(twice, { subject: 'Hi {{ name }}' })).render({ name: 'Ada' }), TOO_SLOW);
    expect(twice.replacements).to.equal(2);
    // A second stop later in the same request gets no second chance.
    const later = stopping([0, 2]);
    const request = await TemplateSet.compile(later, { subject: 'Hi {{ name }}' });
    expect((await request.render({ name: 'Ada' })).subject).to.equal('Hi Ada');
    await refusalOf(() => request.render({ name: 'Bo' }), TOO_SLOW);
  });

  it('compiles again on the new instance when another request made the engine replace it (no cross-tenant failure)', async () => {
    const own = new TemplateEngine();
    const first = await TemplateSet.compile(own, { subject: 'Hi {{ name }}', text: 'Dear {{ name }}' }, { globals: { name: 'all' } });
    expect((await first.render({})).subject).to.equal('Hi all');
    // Another request's render fails inside the engine, which is then replaced.
    corrupt(own);
    await refusalOf(() => TemplateSet.compile(own, { subject: '{{ v }}' }), ENGINE_FAILED);
    expect(own.replacements).to.equal(1);
    expect(await first.render({ name: 'Bo' })).to.deep.equal({ subject: 'Hi Bo', text: 'Dear Bo' });
    expect((await first.render({})).subject).to.equal('Hi all');
    expect(own.replacements).to.equal(1);
    first.dispose();
  });

  it('never lets an internal text through: anything but a MiniJinja diagnostic becomes our words and replaces the engine', async () => {
    for (const internal of [
      new Error('recursive use of an object detected which would lead to unsafe aliasing in rust'),
      new RangeError('Maximum call stack size exceeded'),
      new Error('null pointer passed to rust'),
      new TypeError('undefined value is not a function'),
    ]) {
      const failing = new (class extends TemplateEngine {
        override run<T>(fn: () => T, ms: number): T {
          const result = super.run(fn, ms);
          if (Array.isArray(result)) throw internal;
          return result;
        }
      })();
      const reported: unknown[] = [];
      const set = await TemplateSet.compile(failing, { subject: '{{ v }}' }, { report: (err) => reported.push(err) });
      await refusalOf(() => set.render({ v: 1 }), ENGINE_FAILED);
      expect(reported).to.deep.equal([internal]);
      expect(failing.replacements).to.equal(1);
      set.dispose();
    }
  });

  it('keeps the process alive when environments of a replaced instance are collected (their finalizer would call into it)', async () => {
    const gc = exposeGc();
    const own = new TemplateEngine();
    // Environments still registered with the instance when it fails: a request in flight, one that broke.
    const holder = { envs: [new own.module.Environment(), new own.module.Environment()] as unknown[] };
    corrupt(own);
    await refusalOf(() => TemplateSet.compile(own, { subject: '{{ v }}' }), ENGINE_FAILED);
    // The old glue stays reachable (its registry alive) while its environments are dropped.
    const oldGlue = holder.envs[0]!.constructor;
    holder.envs = [];
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(oldGlue).to.be.a('function');
  });

  it('refuses a rendered subject longer than a subject may be, for that recipient only', async () => {
    await withSet({ subject: 'Hi {{ name }}' }, async (set) => {
      const err = await templateErrorOf(() => set.render({ name: 'x'.repeat(1000) }));
      expect(err.message).to.equal('template error: subject renders to more than 998 characters');
      expect((await set.render({ name: 'Ada' })).subject).to.equal('Hi Ada');
    });
  });

  it('bounds what one request renders in all', async () => {
    const limits = { ...TEMPLATE_LIMITS, requestOutputChars: 1000 };
    await withSet(
      { subject: 'x', text: '{{ "x" * 300 }}{{ n }}' },
      async (set) => {
        for (let i = 0; i < 3; i++) await set.render({ n: i });
        await refusalOf(() => set.render({ n: 3 }), /^template error: the templates render to more than 1000 characters in all$/);
      },
      { limits },
    );
    expect(TEMPLATE_LIMITS.requestOutputChars).to.equal(32 * 1024 * 1024);
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

  it("bounds a request's substitutions together at 1 MiB", () => {
    const value = 'x'.repeat(60_000);
    expect(requestSubstitutionsProblem([{ value }, undefined, ...Array.from({ length: 16 }, () => ({ value }))])).to.equal(null);
    expect(requestSubstitutionsProblem([{ value }, ...Array.from({ length: 17 }, () => ({ value }))])).to.match(/larger than 1 MiB as JSON together$/);
  });
});

/** The garbage collector, without starting node with --expose-gc. */
function exposeGc(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

function wasmPath(): string {
  return join(dirname(createRequire(import.meta.url).resolve('minijinja-js')), 'minijinja_js_bg.wasm');
}
