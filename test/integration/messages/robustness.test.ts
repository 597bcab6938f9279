import { expect } from 'chai';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { TEMPLATE_LIMITS } from '../../../src/message/templating.ts';
import { call } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { corrupt } from '../../helpers/template-engine.ts';

/** Texts of our internals that must never reach a client. */
const INTERNAL = /Maximum call stack|memory access|URIError|RangeError|RuntimeError|unreachable|at [\w.]+ \(/;

/** `{"a":{"a":…"x"…}}` nested `depth` levels, written as text (JSON.stringify would overflow first). */
function nested(depth: number, open = '{"a":', close = '}'): string {
  return `${open.repeat(depth)}"x"${close.repeat(depth)}`;
}

describe('send requests that attack the API (review findings 2-5, 12, 15)', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let n = 0;
  const fresh = () => `r-${++n}@example.org`;

  before(async () => {
    bed = await startMessageBed({ api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } });
  });
  after(async () => bed?.stop());

  /** POST of a raw JSON text to a send operation. */
  async function raw(path: 'messages' | 'messages/conversation', text: string) {
    const res = await call(bed.server, 'POST', `/v2/accounts/${bed.server.accountId}/${path}`, {
      rawBody: text,
      headers: { 'content-type': 'application/json' },
    });
    expect(JSON.stringify(res.body ?? '')).to.not.match(INTERNAL);
    return res;
  }

  const base = `"from":{"email":"app@example.com"},"subject":"Hi {{ name }}","text_content":"Hello"`;

  it('answers 400 naming the field to a tag with a lone surrogate, on both send operations, and stores nothing', async () => {
    const to = fresh();
    const single = await raw('messages', `{${base},"recipients":[{"email":"${to}"}],"tags":["a\\ud800b"]}`);
    expect(single.status).to.equal(400);
    expect(single.body.message).to.equal('tags.0: must be valid Unicode text (it holds an unpaired surrogate)');
    const conversation = await raw('messages/conversation', `{${base},"to":[{"email":"${to}"}],"tags":["\\udc00"]}`);
    expect(conversation.status).to.equal(400);
    expect(conversation.body.message).to.match(/^tags\.0: must be valid Unicode text/);
    expect(await bed.countTo(to)).to.equal(0);
  });

  it('answers 400 to a lone surrogate anywhere: names, subjects, header values, object keys', async () => {
    for (const body of [
      `{"from":{"email":"app@example.com","name":"\\ud800"},"subject":"x","text_content":"y","recipients":[{"email":"${fresh()}"}]}`,
      `{"from":{"email":"app@example.com"},"subject":"\\udbff","text_content":"y","recipients":[{"email":"${fresh()}"}]}`,
      `{${base},"headers":{"X-A":"\\ud800"},"recipients":[{"email":"${fresh()}"}]}`,
      `{${base},"recipients":[{"email":"${fresh()}","substitutions":{"\\ud800":"x"}}]}`,
    ]) {
      const res = await raw('messages', body);
      expect(res.status, body).to.equal(400);
      expect(res.body.message).to.match(/must be valid Unicode text/);
    }
  });

  it('answers 400 to per-recipient substitutions nested 10,000 levels (was a stack overflow and 500)', async () => {
    const res = await raw('messages', `{${base},"recipients":[{"email":"${fresh()}","substitutions":{"name":${nested(10_000)}}}]}`);
    expect(res.status).to.equal(400);
    expect(res.body.message).to.equal(`recipients.0.substitutions.name${'.a'.repeat(28)}: nested more than 32 levels deep`);
  });

  it('answers 400 to any body nested past 32 levels, arrays too', async () => {
    const res = await raw('messages', `{${base},"recipients":[{"email":"${fresh()}"}],"tags":${nested(5000, '[', ']')}}`);
    expect(res.status).to.equal(400);
    expect(res.body.message).to.match(/nested more than 32 levels deep$/);
  });

  it('answers 400 to substitutions deeper than 8 levels or larger than 64 KiB', async () => {
    const deep = await raw('messages', `{${base},"recipients":[{"email":"${fresh()}"}],"substitutions":{"name":${nested(12)}}}`);
    expect(deep.status).to.equal(400);
    expect(deep.body.message).to.equal('substitutions: nested more than 8 levels deep');
    const big = await raw('messages', `{${base},"recipients":[{"email":"${fresh()}","substitutions":{"name":"${'x'.repeat(70_000)}"}}]}`);
    expect(big.status).to.equal(400);
    expect(big.body.message).to.equal('recipients.0.substitutions: larger than 64 KiB as JSON');
  });

  it('keeps templating working for every tenant after top-level substitutions nested 2,500 levels', async () => {
    const attack = await raw('messages', `{${base},"recipients":[{"email":"${fresh()}"}],"substitutions":{"name":${nested(2500)}}}`);
    expect(attack.status).to.equal(400);
    const to = fresh();
    const after = await bed.send({ subject: 'Hi {{ name }}', recipients: [{ email: to, substitutions: { name: 'Ada' } }] });
    expect(after.status, JSON.stringify(after.body)).to.equal(202);
    const stored = await bed.read(after.body.data[0].id);
    expect(stored.subject).to.equal('Hi Ada');
  });

  it('refuses nested loops over range(4000) with 400 at once, and a ping is not held up', async () => {
    const subject = '{% for a in range(4000) %}{% for b in range(4000) %}x{% endfor %}{% endfor %}';
    const started = Date.now();
    const [res, ping] = await Promise.all([
      bed.send({ subject, recipients: [{ email: fresh(), substitutions: { x: 1 } }] }),
      call(bed.server, 'GET', '/v2/ping'),
    ]);
    const ms = Date.now() - started;
    expect(res.status).to.equal(400);
    expect(res.body.message).to.equal('template error: the template exceeds its evaluation budget (loops too long)');
    expect(ping.status).to.equal(200);
    console.log(`      (refused and ping answered in ${ms} ms)`);
  });

  it('refuses a template that amplifies text, without leaking engine internals, and templating still works', async () => {
    const bomb = '{% set ns = namespace(s="xxxxxxxx") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}';
    const res = await bed.send({ subject: 'x', text_content: bomb, recipients: [{ email: fresh(), substitutions: { x: 1 } }] });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.match(/^template error: /);
    const ok = await bed.send({ subject: 'Hi {{ name }}', recipients: [{ email: fresh(), substitutions: { name: 'Bo' } }] });
    expect(ok.status).to.equal(202);
  });

  describe('optional fields as client libraries send them ("" or null for "not given")', () => {
    const file = { data: 'aGk=', base64: true, content_type: 'text/plain', file_name: 'a.txt' };
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a message as the API answers it, of many shapes
    const cases: Array<{ field: string; fields: Record<string, unknown>; conversation?: boolean; check?: (m: Record<string, any>) => void }> = [
      {
        field: 'attachments[].content_disposition ""',
        fields: { attachments: [{ ...file, content_disposition: '' }] },
        check: (m) => expect(m.content_parsed.attachments.map((a: { filename: string }) => a.filename)).to.deep.equal(['a.txt']),
      },
      {
        field: 'attachments[].content_disposition "" (conversation)',
        conversation: true,
        fields: { attachments: [{ ...file, content_disposition: '' }] },
      },
      {
        field: 'attachments[].content_id ""',
        fields: { attachments: [{ ...file, content_id: '' }] },
        check: (m) => expect(m.content_parsed.attachments[0].content_id).to.equal(''),
      },
      {
        field: 'html_content "" with text_content',
        fields: { text_content: 'Hello', html_content: '' },
        check: (m) => expect(m.content_parsed.parts.map((p: { content_type: string }) => p.content_type)).to.deep.equal(['text/plain']),
      },
      {
        field: 'text_content "" with html_content',
        fields: { text_content: '', html_content: '<p>Hello</p>' },
        check: (m) => expect(m.content_parsed.parts.map((p: { content_type: string }) => p.content_type)).to.deep.equal(['text/html']),
      },
      {
        field: 'amp_content ""',
        fields: { amp_content: '' },
        check: (m) => expect(m.content_parsed.parts.map((p: { content_type: string }) => p.content_type)).to.not.include('text/x-amp-html'),
      },
      { field: 'sandbox_result ""', fields: { sandbox_result: '' } },
      {
        field: 'schedule.first_attempt "" and schedule.expires ""',
        fields: { schedule: { first_attempt: '', expires: '' } },
        check: (m) => expect(m.status).to.equal('Received'),
      },
      {
        field: 'reply_to.name ""',
        fields: { reply_to: { email: 'help@example.com', name: '' } },
        check: (m) => expect(m.content_parsed.headers['reply-to']).to.deep.equal(['help@example.com']),
      },
      { field: 'cc null and bcc null (conversation)', conversation: true, fields: { cc: null, bcc: null } },
      {
        field: 'reply_to, tracking, retention, schedule, tags, headers, attachments, substitutions null',
        fields: { reply_to: null, tracking: null, retention: null, schedule: null, tags: null, headers: null, attachments: null, substitutions: null },
      },
    ];
    for (const c of cases) {
      it(`accepts ${c.field} as not given`, async () => {
        const res = c.conversation
          ? await bed.converse({ to: [{ email: fresh() }], ...c.fields })
          : await bed.send({ recipients: [{ email: fresh() }], ...c.fields });
        expect(res.status, JSON.stringify(res.body)).to.equal(202);
        expect(res.body.data[0].status).to.equal('queued');
        if (c.check) c.check(await bed.read(res.body.data[0].id));
      });
    }

    it('still refuses values that are there and wrong, and empty values where "none" makes no sense', async () => {
      for (const [fields, message] of [
        [{ attachments: [{ ...file, content_disposition: 'sideways' }] }, 'attachments[0].content_disposition must be inline or attachment'],
        [{ attachments: [{ ...file, content_type: '' }] }, /^attachments\.0\.content_type: /],
        [{ attachments: [{ ...file, file_name: '' }] }, /^attachments\.0\.file_name: /],
        [{ reply_to: { email: '' } }, 'reply_to.email is not a valid email address'],
        [{ text_content: '', html_content: '' }, 'text_content or html_content is required'],
        [{ tags: [''] }, /^tag "" must be 1 to 64 printable characters/],
        [{ sandbox_result: 'maybe' }, /^sandbox_result: sandbox_result must be one of/],
      ] as const) {
        const res = await bed.send({ recipients: [{ email: fresh() }], ...fields });
        expect(res.status, JSON.stringify(fields)).to.equal(400);
        if (typeof message === 'string') expect(res.body.message).to.equal(message);
        else expect(res.body.message).to.match(message);
      }
      const cc = await bed.converse({ to: [{ email: fresh() }], cc: [] });
      expect(cc.status).to.equal(400);
      expect(cc.body.message).to.equal('cc: cc must have 1 to 50 recipients');
    });
  });

  it('treats empty v1 bodies as absent', async () => {
    const key = await bed.v1Key();
    const res = await bed.v1(
      { from: { email: 'app@example.com' }, recipients: [{ email: fresh() }], content: { subject: 's', text_body: 'hello', html_body: '' } },
      key,
    );
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.success_count).to.equal(1);
  });

  it('answers v1 400 to a lone surrogate in any string, with its own error body', async () => {
    const key = await bed.v1Key();
    const res = await call(bed.server, 'POST', '/v1/email/send', {
      key: null,
      operationId: null,
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      rawBody: `{"from":{"email":"app@example.com"},"recipients":[{"email":"${fresh()}","name":"a\\udfffb"}],"content":{"subject":"s","text_body":"x"}}`,
    });
    expect(res.status).to.equal(400);
    expect(JSON.stringify(res.body)).to.match(/recipients\.0\.name: must be valid Unicode text/);
    expect(JSON.stringify(res.body)).to.not.match(INTERNAL);
  });

  it("answers 400 when a request's substitutions together pass 1 MiB, though each is under 64 KiB", async () => {
    const value = 'x'.repeat(60_000);
    const recipients = Array.from({ length: 20 }, () => ({ email: fresh(), substitutions: { value } }));
    const res = await bed.send({ subject: 'Hi {{ value|length }}', recipients });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.equal("substitutions of the request (global and every recipient's) are larger than 1 MiB as JSON together");
    const fewer = await bed.send({ subject: 'Hi {{ value|length }}', recipients: recipients.slice(0, 10) });
    expect(fewer.status, JSON.stringify(fewer.body)).to.equal(202);
  });

  it('replaces the template engine after a failure inside it: that request gets our words, the next templated send renders (any tenant)', async () => {
    const engine = bed.server.daemon.core.sender.templates;
    const before = engine.replacements;
    // The state the review's attack left behind: the instance's stack pointer astray.
    corrupt(engine);
    const failed = await bed.send({ subject: 'Hi {{ name }}', recipients: [{ email: fresh(), substitutions: { name: 'Ada' } }] });
    expect(failed.status).to.equal(400);
    expect(failed.body).to.deep.equal({ message: 'template error: the template could not be rendered' });
    expect(engine.replacements).to.equal(before + 1);
    for (const name of ['Bo', 'Cy']) {
      const ok = await bed.send({ subject: 'Hi {{ name }}', html_content: '<p>{{ name }}</p>', recipients: [{ email: fresh(), substitutions: { name } }] });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(202);
      const stored = await bed.read(ok.body.data[0].id);
      expect(stored.subject).to.equal(`Hi ${name}`);
    }
  });

  it('stops a template whose few instructions each work on megabytes (fuel alone let it run for minutes), and a ping is answered', async () => {
    const text = '{% for i in range(3000) %}{{ ("x " * 500000)|title|length }}{% endfor %}';
    const [res, ping] = await Promise.all([
      bed.send({ text_content: text, recipients: [{ email: fresh(), substitutions: { x: 1 } }] }),
      call(bed.server, 'GET', '/v2/ping'),
    ]);
    expect(res.status).to.equal(400);
    expect(res.body.message).to.equal('template error: the template exceeds its evaluation budget (it takes too long to render)');
    expect(ping.status).to.equal(200);
    const ok = await bed.send({ subject: 'Hi {{ name }}', recipients: [{ email: fresh(), substitutions: { name: 'Di' } }] });
    expect(ok.status).to.equal(202);
  });

  it('refuses every costly template we know of with 400, and prints how long each held the event loop', async () => {
    const costly: Record<string, string> = {
      'nested loops': '{% for a in range(4000) %}{% for b in range(4000) %}x{% endfor %}{% endfor %}',
      'loop of 1 MB string repeats': '{% for i in range(100000) %}{{ ("x" * 1000000)|length }}{% endfor %}',
      'loop of |replace on 100 KB': '{% for i in range(100000) %}{{ ("x" * 100000)|replace("x", "yy")|length }}{% endfor %}',
      'loop of |upper on 1 MB': '{% for i in range(100000) %}{{ ("x" * 1000000)|upper|length }}{% endfor %}',
      'loop of |indent on 200 KB': '{% for i in range(100000) %}{{ ("x\\n" * 100000)|indent(100)|length }}{% endfor %}',
      'loop of |title on 1 MB': '{% for i in range(100000) %}{{ ("x " * 500000)|title|length }}{% endfor %}',
      'loop of sort over 100,000': '{% for i in range(1000) %}{{ range(100000)|reverse|sort|length }}{% endfor %}',
      'loop of |unique over 100,000': '{% for i in range(1000) %}{{ range(100000)|unique|list|length }}{% endfor %}',
      'loop of |tojson over 100,000': '{% for i in range(1000) %}{{ range(100000)|tojson|length }}{% endfor %}',
      'loop of |batch(1) over 100,000': '{% for i in range(1000) %}{{ range(100000)|batch(1)|list|length }}{% endfor %}',
      'string doubled in a loop': '{% set ns = namespace(s="xxxxxxxx") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}',
      '100 MB folded while compiling': '{{ ("x" * 100000000)|length }}',
    };
    const rows: Array<{ name: string; ms: number; heldMs: number }> = [];
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    try {
      for (const [name, text] of Object.entries(costly)) {
        delay.reset();
        const started = performance.now();
        const res = await bed.send({ text_content: text, recipients: [{ email: fresh(), substitutions: { x: 1 } }] });
        rows.push({ name, ms: performance.now() - started, heldMs: delay.max / 1e6 });
        expect(res.status, `${name}: ${JSON.stringify(res.body)}`).to.equal(400);
        expect(res.body.message, name).to.match(/^template error: /);
      }
    } finally {
      delay.disable();
    }
    console.log(`      ${'template'.padEnd(32)} ${'answered in'.padStart(12)} ${'longest hold'.padStart(13)}`);
    for (const r of rows) console.log(`      ${r.name.padEnd(32)} ${r.ms.toFixed(1).padStart(9)} ms ${r.heldMs.toFixed(1).padStart(10)} ms`);
    const worst = rows.reduce((a, b) => (b.heldMs > a.heldMs ? b : a));
    console.log(
      `      worst hold of the event loop: ${worst.heldMs.toFixed(1)} ms (${worst.name}; fuel ${TEMPLATE_LIMITS.fuel}, steps of ${TEMPLATE_LIMITS.stepMs} ms, ${TEMPLATE_LIMITS.requestMs} ms a request)`,
    );
  });

  it("reports a subject that renders past 998 characters as that recipient's error and sends to the others", async () => {
    const long = fresh();
    const short = fresh();
    const res = await bed.send({
      subject: 'Hi {{ name }}',
      recipients: [
        { email: long, substitutions: { name: 'x'.repeat(1000) } },
        { email: short, substitutions: { name: 'Ed' } },
      ],
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body.data.map((e: { status: string; error: string | null }) => [e.status, e.error])).to.deep.equal([
      ['error', 'template error: subject renders to more than 998 characters'],
      ['queued', null],
    ]);
    expect(await bed.countTo(long)).to.equal(0);
  });
});
