import { expect } from 'chai';
import { call } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';

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

  it('treats "" as absent in the optional strings client libraries always send (content_disposition, bodies, schedule, sandbox_result)', async () => {
    const to = fresh();
    const res = await bed.send({
      recipients: [{ email: to }],
      text_content: 'Hello',
      html_content: '',
      amp_content: '',
      sandbox_result: '',
      schedule: { first_attempt: '', expires: '' },
      attachments: [{ data: 'aGk=', base64: true, content_type: 'text/plain', file_name: 'a.txt', content_disposition: '', content_id: '' }],
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const stored = await bed.read(res.body.data[0].id);
    expect(stored.content_parsed.attachments).to.have.length(1);
    expect(stored.content_parsed.parts.map((p: { content_type: string }) => p.content_type)).to.deep.equal(['text/plain']);
    const conversation = await bed.converse({ to: [{ email: fresh() }], attachments: [{ data: 'x', content_type: 'text/plain', file_name: 'b.txt', content_disposition: '' }] });
    expect(conversation.status, JSON.stringify(conversation.body)).to.equal(202);
    // A value that is there and wrong is still refused.
    const wrong = await bed.send({ recipients: [{ email: fresh() }], attachments: [{ data: 'x', content_type: 'text/plain', file_name: 'c.txt', content_disposition: 'sideways' }] });
    expect(wrong.status).to.equal(400);
  });

  it('treats empty v1 bodies as absent', async () => {
    const key = await bed.v1Key();
    const res = await bed.v1({ from: { email: 'app@example.com' }, recipients: [{ email: fresh() }], content: { subject: 's', text_body: 'hello', html_body: '' } }, key);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.success_count).to.equal(1);
  });
});
