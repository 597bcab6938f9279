import { expect } from 'chai';
import { checkSubstitutions, TemplateError, TemplateSet, type TemplateSources } from '../../../src/message/templating.ts';

/** Builds a set, runs `fn` with it and frees it. */
function withSet<T>(sources: TemplateSources, fn: (set: TemplateSet) => T): T {
  const set = new TemplateSet(sources);
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
    const err = templateErrorOf(() => new TemplateSet({ subject: 'ok', html: '<p>{{ name </p>' }));
    expect(err.message).to.match(/^template error: /);
    expect(err.message).to.include('html_content');
    expect(err.message).to.not.include('\n');
  });

  it('reports an unclosed block as a syntax error', () => {
    templateErrorOf(() => new TemplateSet({ subject: '{% if x %}never closed' }));
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
