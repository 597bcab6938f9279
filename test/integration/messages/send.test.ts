import { expect } from 'chai';
import { MessagesRepo } from '../../../src/store/messages-repo.ts';
import type { MessageRecord } from '../../../src/store/records.ts';
import { DAY_MS } from '../../helpers/domains.ts';
import type { CallOptions } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';

/** A generated Message-ID: a UUIDv7 at the sender domain, in angle brackets. */
const MESSAGE_ID = /^<([0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})@example\.com>$/;
const HOUR_MS = 60 * 60 * 1000;

interface Entry {
  object: string;
  id: string | null;
  recipient: { email: string; name: string; substitutions?: Record<string, unknown> };
  status: string;
  error: string | null;
  schedule?: { first_attempt?: string; expires?: string };
}

interface FullMessage {
  id: string;
  message_id: string;
  recipient: string;
  sender: string;
  subject: string;
  tags: string[];
  created_at: string;
  retain_until: string;
  content: string;
  content_parsed: {
    parts: Array<{ content_type: string; content: string }>;
    attachments: Array<{ filename: string; content: string; content_type: string; content_id: string }>;
    headers: Record<string, string[]>;
  };
}

describe('POST /v2/accounts/{id}/messages', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let n = 0;
  /** A recipient address no other test uses: counts by recipient stay per test. */
  const fresh = (label = 'r') => `${label}-${++n}@example.org`;

  before(async () => {
    bed = await startMessageBed();
    await bed.create('other.example');
  });
  after(async () => bed?.stop());
  // The rate limiter runs on the test clock: move it so that every test starts with a full bucket.
  beforeEach(() => bed.clock.advance(5_000));

  const entries = (body: { data: Entry[] }) => body.data;

  async function accepted(fields: Record<string, unknown>, options: CallOptions = {}): Promise<Entry[]> {
    const res = await bed.send(fields, options);
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return entries(res.body);
  }

  async function refused(fields: Record<string, unknown>, status = 400): Promise<string> {
    const res = await bed.send(fields);
    expect(res.status, JSON.stringify(res.body)).to.equal(status);
    expect(res.body).to.have.keys('message');
    return res.body.message as string;
  }

  const read = async (id: string) => (await bed.read(id)) as FullMessage;

  const countTo = (recipient: string) => bed.countTo(recipient);

  async function record(messageId: string): Promise<MessageRecord> {
    const uuid = MESSAGE_ID.exec(messageId)?.[1];
    expect(uuid, messageId).to.be.a('string');
    const found = await new MessagesRepo(bed.server.daemon.core.store).get(uuid!);
    expect(found, `record of ${messageId}`).to.not.equal(undefined);
    return found!;
  }

  const part = (m: FullMessage, type: string) => m.content_parsed.parts.find((p) => p.content_type === type)?.content;

  describe('acceptance', () => {
    it('answers 202 with one queued entry per recipient, in request order, each id <uuidv7@example.com>', async () => {
      const a = fresh();
      const b = fresh();
      const c = fresh();
      const res = await bed.send({ recipients: [{ email: a, name: 'A' }, { email: b }, { email: c, name: 'C' }] });
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      expect(res.body.object).to.equal('list');
      expect(res.body).to.not.have.property('pagination');
      const data = entries(res.body);
      expect(data.map((e) => e.recipient)).to.deep.equal([
        { email: a, name: 'A' },
        { email: b, name: '' },
        { email: c, name: 'C' },
      ]);
      for (const e of data) {
        expect(e.object).to.equal('message');
        expect(e.id).to.match(MESSAGE_ID);
        expect(e.status).to.equal('queued');
        expect(e.error).to.equal(null);
        expect(e).to.not.have.property('schedule');
      }
      expect(new Set(data.map((e) => e.id)).size).to.equal(3);
    });

    it('makes each recipient its own message: To holds only that recipient, the Message-ID is its own', async () => {
      const recipients = [{ email: fresh(), name: 'First' }, { email: fresh(), name: 'Second' }, { email: fresh() }];
      const data = await accepted({ recipients });
      const seen = new Set<string>();
      for (const [i, e] of data.entries()) {
        const m = await read(e.id!);
        expect(m.message_id).to.equal(e.id);
        expect(m.recipient).to.equal(recipients[i]!.email);
        expect(m.sender).to.equal('app@example.com');
        const headers = m.content_parsed.headers;
        expect(headers.to, JSON.stringify(headers)).to.have.length(1);
        expect(headers.to![0]).to.include(recipients[i]!.email);
        expect(headers['message-id']).to.deep.equal([e.id]);
        expect(headers.from).to.deep.equal(['App <app@example.com>']);
        for (const [j, other] of recipients.entries()) {
          if (j !== i) expect(m.content, `message ${i} mentions recipient ${j}`).to.not.include(other.email);
        }
        expect(m.content).to.not.match(/^(cc|bcc):/im);
        seen.add(headers['message-id']![0]!);
      }
      expect(seen.size).to.equal(3);
    });

    it('writes the recipient name into the To header', async () => {
      const email = fresh();
      const [e] = await accepted({ recipients: [{ email, name: 'Ada Lovelace' }] });
      expect((await read(e!.id!)).content_parsed.headers.to).to.deep.equal([`"Ada Lovelace" <${email}>`]);
    });

    it('reads a sent message back by its bare UUID as well as by its Message-ID', async () => {
      const [e] = await accepted({ recipients: [{ email: fresh() }] });
      const uuid = MESSAGE_ID.exec(e!.id!)![1]!;
      const byUuid = await read(uuid);
      expect(byUuid.message_id).to.equal(e!.id);
      expect(byUuid.id).to.equal(uuid);
    });

    it('stores the text and HTML bodies as given', async () => {
      const [e] = await accepted({ recipients: [{ email: fresh() }], text_content: 'Plain body', html_content: '<p>HTML body</p>' });
      const m = await read(e!.id!);
      expect(part(m, 'text/plain')).to.equal('Plain body');
      expect(part(m, 'text/html')).to.equal('<p>HTML body</p>');
      expect(m.subject).to.equal('Hello');
    });

    it('stores the AMP content as its own text/x-amp-html part', async () => {
      const amp = '<!doctype html><html amp4email><body>AMP</body></html>';
      const [e] = await accepted({ recipients: [{ email: fresh() }], amp_content: amp });
      const m = await read(e!.id!);
      expect(part(m, 'text/x-amp-html')).to.equal(amp);
      expect(part(m, 'text/html')).to.equal('<p>Hi there</p>');
      expect(m.content_parsed.attachments).to.deep.equal([]);
    });

    it('accepts a text-only and an HTML-only message', async () => {
      const [t] = await accepted({ recipients: [{ email: fresh() }], html_content: null });
      const text = await read(t!.id!);
      // A single-part body ends with the line break of its last line.
      expect(part(text, 'text/plain')?.trimEnd()).to.equal('Hi there');
      expect(part(text, 'text/html')).to.equal(undefined);
      expect(text.content).to.match(/^Content-Type: text\/plain; charset=utf-8\r$/m);
      const [h] = await accepted({ recipients: [{ email: fresh() }], text_content: null });
      const html = await read(h!.id!);
      expect(part(html, 'text/html')?.trimEnd()).to.equal('<p>Hi there</p>');
      expect(part(html, 'text/plain')).to.equal(undefined);
    });

    it('accepts 100 recipients, each with its own message', async () => {
      const recipients = Array.from({ length: 100 }, () => ({ email: fresh('hundred') }));
      const data = await accepted({ recipients });
      expect(data).to.have.length(100);
      expect(data.every((e) => e.status === 'queued')).to.equal(true);
      expect(new Set(data.map((e) => e.id)).size).to.equal(100);
      expect(await countTo(recipients[99]!.email)).to.equal(1);
    });

    it('refuses 101 recipients with 400 and stores none of them', async () => {
      const recipients = Array.from({ length: 101 }, () => ({ email: fresh('too-many') }));
      expect(await refused({ recipients })).to.match(/100 recipients/);
      expect(await countTo(recipients[0]!.email)).to.equal(0);
    });

    it('refuses an empty recipient list with 400', async () => {
      expect(await refused({ recipients: [] })).to.match(/recipient/);
    });

    it('refuses a request without recipients with 400', async () => {
      expect(await refused({ recipients: undefined })).to.match(/recipients/);
    });

    it('refuses a message with neither text_content nor html_content, absent, null or empty', async () => {
      const email = fresh();
      expect(await refused({ recipients: [{ email }], text_content: null, html_content: null })).to.match(/text_content or html_content/);
      expect(await refused({ recipients: [{ email }], text_content: '', html_content: '' })).to.match(/text_content or html_content/);
      expect(await refused({ recipients: [{ email }], text_content: undefined, html_content: undefined })).to.match(/text_content or html_content/);
      expect(await countTo(email)).to.equal(0);
    });

    it('refuses a request without a subject with 400', async () => {
      expect(await refused({ subject: undefined })).to.match(/subject/);
    });
  });

  describe('recipients', () => {
    // A 202 may only echo valid addresses (`recipient.email` is `format: email` in the contract):
    // a malformed address refuses the whole request.
    it('refuses a malformed recipient address with 400 naming it, and sends to no one', async () => {
      const good = fresh();
      const message = await refused({ recipients: [{ email: good }, { email: 'not-an-address' }] });
      expect(message).to.match(/recipients\[1\]\.email/);
      expect(await countTo(good)).to.equal(0);
      expect(await refused({ recipients: [{ email: 'sp ace@example.org' }] })).to.match(/recipients\[0\]\.email/);
      expect(await refused({ recipients: [{ email: 'b@' }] })).to.match(/recipients\[0\]\.email/);
    });

    it('refuses a malformed recipient address with 400 in a templated send too', async () => {
      const good = fresh();
      expect(await refused({ substitutions: { x: 1 }, recipients: [{ email: good, substitutions: { y: 2 } }, { email: 'nope' }] })).to.match(
        /recipients\[1\]\.email/,
      );
      expect(await countTo(good)).to.equal(0);
    });

    for (const email of ['a,b@example.org', 'a>b@example.org', 'a<b@example.org']) {
      it(`refuses ${email} with 400: its unquoted local part would change the meaning of the To header`, async () => {
        expect(await refused({ recipients: [{ email }] })).to.match(/recipients\[0\]\.email/);
      });
    }

    it('keeps a recipient name with CR/LF inside the To header: it cannot add a header of its own', async () => {
      const email = fresh();
      const [e] = await accepted({ recipients: [{ email, name: 'Eve\r\nX-Injected: yes' }] });
      const m = await read(e!.id!);
      expect(m.content_parsed.headers).to.not.have.property('x-injected');
      expect(m.content).to.not.match(/^X-Injected:/m);
      expect(m.content_parsed.headers.to).to.have.length(1);
      expect(m.content_parsed.headers.to![0]).to.include(email);
    });

    it('keeps a recipient name with a blank line from ending the header block', async () => {
      const [e] = await accepted({ recipients: [{ email: fresh(), name: 'Eve\r\n\r\nInjected body' }] });
      const m = await read(e!.id!);
      expect(m.content_parsed.headers.subject).to.deep.equal(['Hello']);
      expect(m.content_parsed.headers.from).to.deep.equal(['App <app@example.com>']);
    });
  });

  describe('templating', () => {
    it('renders global and per-recipient substitutions into subject, text and HTML, the recipient winning', async () => {
      const own = fresh();
      const global = fresh();
      const data = await accepted({
        subject: 'Hi {{ name }} from {{ company }}',
        text_content: 'Dear {{ name }}, welcome to {{ company }}.',
        html_content: '<p>Dear {{ name }} of {{ company }}</p>',
        substitutions: { name: 'Customer', company: 'Acme' },
        recipients: [{ email: own, substitutions: { name: 'Ada' } }, { email: global }],
      });
      expect(data.map((e) => e.status)).to.deep.equal(['queued', 'queued']);
      const ada = await read(data[0]!.id!);
      expect(ada.subject).to.equal('Hi Ada from Acme');
      expect(ada.content_parsed.headers.subject).to.deep.equal(['Hi Ada from Acme']);
      expect(part(ada, 'text/plain')).to.equal('Dear Ada, welcome to Acme.');
      expect(part(ada, 'text/html')).to.equal('<p>Dear Ada of Acme</p>');
      const other = await read(data[1]!.id!);
      expect(other.subject).to.equal('Hi Customer from Acme');
      expect(part(other, 'text/plain')).to.equal('Dear Customer, welcome to Acme.');
      expect(part(other, 'text/html')).to.equal('<p>Dear Customer of Acme</p>');
    });

    it('renders per-recipient substitutions without global ones', async () => {
      const data = await accepted({
        subject: 'Order {{ order.id }}',
        text_content: '{% for item in order.items %}{{ item }};{% endfor %}',
        recipients: [{ email: fresh(), substitutions: { order: { id: 7, items: ['a', 'b'] } } }, { email: fresh() }],
      });
      const first = await read(data[0]!.id!);
      expect(first.subject).to.equal('Order 7');
      expect(part(first, 'text/plain')).to.equal('a;b;');
    });

    it("echoes each recipient's substitutions in its entry", async () => {
      const email = fresh();
      const [e] = await accepted({ subject: '{{ n }}', recipients: [{ email, name: 'N', substitutions: { n: 1, deep: { x: [true] } } }] });
      expect(e!.recipient).to.deep.equal({ email, name: 'N', substitutions: { n: 1, deep: { x: [true] } } });
    });

    it('sends {{ … }} literally when the request has no substitutions', async () => {
      const [e] = await accepted({
        subject: 'Hi {{ name }}',
        text_content: 'Dear {{ name }} {% raw %}',
        html_content: '<p>{{ name }}</p>',
        recipients: [{ email: fresh() }],
      });
      const m = await read(e!.id!);
      expect(m.subject).to.equal('Hi {{ name }}');
      expect(part(m, 'text/plain')).to.equal('Dear {{ name }} {% raw %}');
      expect(part(m, 'text/html')).to.equal('<p>{{ name }}</p>');
    });

    it('sends {{ … }} literally when the substitutions are empty objects', async () => {
      const [e] = await accepted({ subject: 'Hi {{ name }}', substitutions: {}, recipients: [{ email: fresh(), substitutions: {} }] });
      expect((await read(e!.id!)).subject).to.equal('Hi {{ name }}');
    });

    it('autoescapes substituted values in HTML but not in text or subject', async () => {
      const value = '<b>Ada & "Co"</b>';
      const [e] = await accepted({
        subject: 'For {{ name }}',
        text_content: 'Name: {{ name }}',
        html_content: '<p>{{ name }}</p>',
        recipients: [{ email: fresh(), substitutions: { name: value } }],
      });
      const m = await read(e!.id!);
      const html = part(m, 'text/html')!;
      expect(html).to.not.include('<b>');
      expect(html).to.include('&lt;b&gt;Ada &amp;');
      expect(part(m, 'text/plain')).to.equal(`Name: ${value}`);
      expect(m.subject).to.equal(`For ${value}`);
    });

    it('refuses a template syntax error with 400 and accepts no recipient', async () => {
      const email = fresh();
      const message = await refused({ html_content: '<p>{{ name </p>', substitutions: { name: 'x' }, recipients: [{ email }] });
      expect(message).to.match(/template error/);
      expect(await countTo(email)).to.equal(0);
    });

    it('refuses global substitutions holding template syntax with 400', async () => {
      expect(await refused({ subject: '{{ a }}', substitutions: { a: '{{ secret }}' } })).to.match(/template syntax/);
    });

    it('gives a recipient whose rendering fails an error entry while the others are queued', async () => {
      const ok = fresh();
      const broken = fresh();
      const data = await accepted({
        text_content: 'Hello {{ user.name }}',
        recipients: [
          { email: ok, substitutions: { user: { name: 'Ada' } } },
          { email: broken, substitutions: { other: 1 } },
        ],
      });
      expect(data[0]).to.include({ status: 'queued', error: null });
      expect(data[1]).to.include({ status: 'error', id: null });
      expect(data[1]!.error)
        .to.be.a('string')
        .and.match(/template error/);
      expect(part(await read(data[0]!.id!), 'text/plain')).to.equal('Hello Ada');
      expect(await countTo(broken)).to.equal(0);
    });

    it('gives a recipient whose substitution value holds {{ an error entry while the others are queued', async () => {
      const ok = fresh();
      const injected = fresh();
      const data = await accepted({
        subject: 'Hi {{ name }}',
        recipients: [
          { email: injected, substitutions: { name: '{{ 7 * 7 }}' } },
          { email: ok, substitutions: { name: 'Bob' } },
        ],
      });
      expect(data[0]).to.include({ status: 'error', id: null });
      expect(data[0]!.error).to.match(/template syntax/);
      expect(data[1]).to.include({ status: 'queued', error: null });
      expect((await read(data[1]!.id!)).subject).to.equal('Hi Bob');
      expect(await countTo(injected)).to.equal(0);
    });
    it('answers 202 with only error entries when every recipient fails to render, storing nothing', async () => {
      const a = fresh();
      const data = await accepted({
        subject: '{{ user.name }}',
        recipients: [
          { email: a, substitutions: { x: 1 } },
          { email: fresh(), substitutions: { name: '{%' } },
        ],
      });
      expect(data.map((e) => [e.status, e.id])).to.deep.equal([
        ['error', null],
        ['error', null],
      ]);
      expect(await countTo(a)).to.equal(0);
    });
  });

  describe('attachments', () => {
    it('decodes base64 attachment data: the stored message holds the original bytes', async () => {
      const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const [e] = await accepted({
        recipients: [{ email: fresh() }],
        attachments: [{ data: bytes.toString('base64'), base64: true, file_name: 'bytes.bin', content_type: 'application/octet-stream' }],
      });
      const [a, ...rest] = (await read(e!.id!)).content_parsed.attachments;
      expect(rest).to.have.length(0);
      expect(a).to.include({ filename: 'bytes.bin', content_type: 'application/octet-stream' });
      expect(Buffer.from(a!.content, 'base64').equals(bytes)).to.equal(true);
    });

    it('takes attachment data without base64 as UTF-8 text', async () => {
      const text = 'h\u00e9llo w\u00f6rld \u4e16\u754c';
      const [e] = await accepted({ recipients: [{ email: fresh() }], attachments: [{ data: text, file_name: 'note.txt', content_type: 'text/plain' }] });
      const [a] = (await read(e!.id!)).content_parsed.attachments;
      expect(Buffer.from(a!.content, 'base64').toString('utf8')).to.equal(text);
    });

    it('refuses attachment data that is not base64 with 400 and accepts nothing', async () => {
      const email = fresh();
      const message = await refused({
        recipients: [{ email }],
        attachments: [{ data: 'this is not base64!', base64: true, file_name: 'x.bin', content_type: 'application/octet-stream' }],
      });
      expect(message).to.match(/attachments\[0\]\.data/);
      expect(await countTo(email)).to.equal(0);
    });

    it('makes an attachment whose content_id is <bracketed> inline: Content-ID header in multipart/related', async () => {
      const [e] = await accepted({
        recipients: [{ email: fresh() }],
        html_content: '<p><img src="cid:logo@example.com"></p>',
        attachments: [{ data: 'aGVsbG8=', base64: true, file_name: 'logo.png', content_type: 'image/png', content_id: '<logo@example.com>' }],
      });
      const m = await read(e!.id!);
      expect(m.content).to.match(/Content-Type: multipart\/related/);
      expect(m.content).to.include('Content-ID: <logo@example.com>');
      expect(m.content).to.match(/Content-Disposition: inline; filename=logo\.png/);
      expect(m.content_parsed.attachments[0]).to.include({ content_id: '<logo@example.com>', filename: 'logo.png' });
      expect(part(m, 'text/html')).to.include('cid:logo@example.com');
    });

    it('keeps an attachment whose content_id has no brackets an ordinary attachment', async () => {
      const [e] = await accepted({
        recipients: [{ email: fresh() }],
        attachments: [{ data: 'aGVsbG8=', base64: true, file_name: 'logo.png', content_type: 'image/png', content_id: 'logo@example.com' }],
      });
      const m = await read(e!.id!);
      expect(m.content).to.not.match(/Content-ID:/i);
      expect(m.content).to.not.include('multipart/related');
      expect(m.content).to.match(/Content-Type: multipart\/mixed/);
      expect(m.content).to.match(/Content-Disposition: attachment; filename=logo\.png/);
      expect(m.content_parsed.attachments[0]).to.include({ content_id: '', filename: 'logo.png' });
    });
  });

  describe('custom headers', () => {
    it('adds custom headers to the message', async () => {
      const [e] = await accepted({ recipients: [{ email: fresh() }], headers: { 'X-Campaign': 'spring-2026', 'List-Unsubscribe': '<mailto:u@example.com>' } });
      const headers = (await read(e!.id!)).content_parsed.headers;
      expect(headers['x-campaign']).to.deep.equal(['spring-2026']);
      expect(headers['list-unsubscribe']).to.deep.equal(['<mailto:u@example.com>']);
    });

    it('refuses a header value with CR/LF with 400: no header injection', async () => {
      const email = fresh();
      expect(await refused({ recipients: [{ email }], headers: { 'X-Note': 'a\r\nBcc: victim@example.org' } })).to.match(/X-Note/);
      expect(await refused({ recipients: [{ email }], headers: { 'X-Note': 'a\nb' } })).to.match(/X-Note/);
      expect(await countTo(email)).to.equal(0);
    });

    it('refuses a header name with a space or non-ASCII character with 400', async () => {
      expect(await refused({ headers: { 'X Note': 'v' } })).to.match(/invalid header name/);
      expect(await refused({ headers: { 'X-N\u00f6te': 'v' } })).to.match(/invalid header name/);
      expect(await refused({ headers: { 'X:Note': 'v' } })).to.match(/invalid header name/);
    });

    it('ignores a message-id header: the Message-ID is the generated one', async () => {
      const [e] = await accepted({ recipients: [{ email: fresh() }], headers: { 'Message-ID': '<mine@client.example>' } });
      expect(e!.id).to.match(MESSAGE_ID);
      const m = await read(e!.id!);
      expect(m.content_parsed.headers['message-id']).to.deep.equal([e!.id]);
      expect(m.content).to.not.include('mine@client.example');
    });

    it('refuses a reply-to header together with the reply_to field with 400', async () => {
      expect(await refused({ reply_to: { email: 'help@example.com' }, headers: { 'Reply-To': 'other@example.com' } })).to.match(/reply/i);
    });

    it('takes Reply-To from the reply_to field, or from a reply-to header when the field is absent', async () => {
      const [field] = await accepted({ recipients: [{ email: fresh() }], reply_to: { email: 'help@example.com', name: 'Help' } });
      expect((await read(field!.id!)).content_parsed.headers['reply-to']).to.deep.equal(['Help <help@example.com>']);
      const [header] = await accepted({ recipients: [{ email: fresh() }], headers: { 'Reply-To': 'desk@example.com' } });
      expect((await read(header!.id!)).content_parsed.headers['reply-to']).to.deep.equal(['desk@example.com']);
    });

    it('refuses From and Content-Type headers, which come from the request fields, with 400', async () => {
      expect(await refused({ headers: { From: 'spoof@bank.example' } })).to.match(/From/);
      expect(await refused({ headers: { 'content-type': 'text/plain' } })).to.match(/content-type/);
    });
  });

  describe('tags', () => {
    it('stores the tags and shows them on the message and in the tag filter', async () => {
      const email = fresh();
      const [e] = await accepted({ recipients: [{ email }], tags: ['welcome', 'onboarding'] });
      expect((await read(e!.id!)).tags).to.deep.equal(['welcome', 'onboarding']);
      const listed = await bed.api('GET', `${bed.messages}?tags=onboarding&recipient=${encodeURIComponent(email)}`);
      expect(listed.status).to.equal(200);
      expect(listed.body.data.map((m: { message_id: string }) => m.message_id)).to.deep.equal([e!.id]);
    });

    it('accepts 10 tags and refuses 11 with 400', async () => {
      const ten = Array.from({ length: 10 }, (_, i) => `tag-${i}`);
      const [e] = await accepted({ recipients: [{ email: fresh() }], tags: ten });
      expect((await read(e!.id!)).tags).to.deep.equal(ten);
      expect(await refused({ tags: [...ten, 'tag-10'] })).to.match(/at most 10 tags/);
    });
  });

  describe('tracking and retention', () => {
    it('stores the tracking overrides of the request', async () => {
      const [e] = await accepted({ recipients: [{ email: fresh() }], tracking: { open: true, click: false } });
      expect((await record(e!.id!)).tracking).to.deep.equal({ open: true, click: false });
    });

    it('takes the account defaults for tracking fields that are absent or null', async () => {
      const account = (await bed.server.daemon.core.accounts.get(bed.server.accountId))!;
      const [e] = await accepted({ recipients: [{ email: fresh() }], tracking: { open: null } });
      expect((await record(e!.id!)).tracking).to.deep.equal({ open: account.trackOpens, click: account.trackClicks });
      const [flipped] = await accepted({ recipients: [{ email: fresh() }], tracking: { open: !account.trackOpens } });
      expect((await record(flipped!.id!)).tracking.open).to.equal(!account.trackOpens);
    });

    it('stores the retention of the request: retain_until is created_at plus the metadata days', async () => {
      const [e] = await accepted({ recipients: [{ email: fresh() }], retention: { metadata: 3, data: 0 } });
      const m = await read(e!.id!);
      expect(Date.parse(m.retain_until) - Date.parse(m.created_at)).to.equal(3 * DAY_MS);
      expect((await record(e!.id!)).retention).to.deep.equal({ metadataDays: 3, dataDays: 0 });
    });

    it("takes the account's retention when the request has none", async () => {
      const account = (await bed.server.daemon.core.accounts.get(bed.server.accountId))!;
      const [e] = await accepted({ recipients: [{ email: fresh() }] });
      const m = await read(e!.id!);
      expect(Date.parse(m.retain_until) - Date.parse(m.created_at)).to.equal(account.messageMetadataRetention * DAY_MS);
      expect((await record(e!.id!)).retention).to.deep.equal({ metadataDays: account.messageMetadataRetention, dataDays: account.messageDataRetention });
    });

    it('accepts the retention bounds: metadata 1 and 30, data 0 and 30', async () => {
      await accepted({ recipients: [{ email: fresh() }], retention: { metadata: 1, data: 30 } });
      await accepted({ recipients: [{ email: fresh() }], retention: { metadata: 30, data: 0 } });
    });

    for (const retention of [{ metadata: 0 }, { metadata: 31 }, { metadata: 1.5 }, { data: 31 }, { data: -1 }]) {
      it(`refuses retention ${JSON.stringify(retention)} with 400`, async () => {
        expect(await refused({ retention })).to.match(/retention\.(metadata|data)/);
      });
    }
  });

  describe('schedule', () => {
    const at = (offsetMs: number) => new Date(bed.clock.now() + offsetMs).toISOString();

    it('answers status scheduled and echoes the schedule', async () => {
      const schedule = { first_attempt: at(HOUR_MS), expires: at(2 * DAY_MS) };
      const [e] = await accepted({ recipients: [{ email: fresh() }], schedule });
      expect(e!.status).to.equal('scheduled');
      expect(e!.id).to.match(MESSAGE_ID);
      expect(Date.parse(e!.schedule!.first_attempt!)).to.equal(Date.parse(schedule.first_attempt));
      expect(Date.parse(e!.schedule!.expires!)).to.equal(Date.parse(schedule.expires));
      expect((await record(e!.id!)).dueAt).to.equal(new Date(Date.parse(schedule.first_attempt)).toISOString());
    });

    it('echoes an expires-only schedule', async () => {
      const expires = at(DAY_MS);
      const [e] = await accepted({ recipients: [{ email: fresh() }], schedule: { expires } });
      expect(e!.schedule).to.deep.equal({ expires: new Date(Date.parse(expires)).toISOString() });
    });

    it('accepts a first attempt just within 7 days and an expiry just within 8 days', async () => {
      const [e] = await accepted({ recipients: [{ email: fresh() }], schedule: { first_attempt: at(7 * DAY_MS - 60_000), expires: at(8 * DAY_MS - 60_000) } });
      expect(e!.status).to.equal('scheduled');
    });

    it('refuses a first attempt in the past with 400', async () => {
      expect(await refused({ schedule: { first_attempt: at(-60_000) } })).to.match(/first_attempt/);
    });

    it('refuses a first attempt more than 7 days ahead with 400', async () => {
      expect(await refused({ schedule: { first_attempt: at(7 * DAY_MS + 60_000) } })).to.match(/first_attempt/);
    });

    it('refuses an expiry more than 8 days ahead with 400', async () => {
      expect(await refused({ schedule: { expires: at(8 * DAY_MS + 60_000) } })).to.match(/expires/);
    });

    it('refuses an expiry in the past with 400', async () => {
      expect(await refused({ schedule: { expires: at(-60_000) } })).to.match(/expires/);
    });

    for (const bad of ['tomorrow', '2026-11-22', '2026-11-22 10:00:00', '2026-11-22T10:00:00']) {
      it(`refuses the schedule time ${JSON.stringify(bad)}, not RFC 3339, with 400`, async () => {
        expect(await refused({ schedule: { first_attempt: bad } })).to.match(/RFC3339/);
      });
    }
  });

  describe('sandbox', () => {
    it('accepts sandbox with a sandbox_result and stores the result', async () => {
      const [e] = await accepted({ recipients: [{ email: fresh() }], sandbox: true, sandbox_result: 'bounce' });
      expect(e!.status).to.equal('queued');
      expect((await record(e!.id!)).sandbox).to.equal('bounce');
    });

    it('defaults the sandbox result to deliver, and sends for real without sandbox', async () => {
      const [sandboxed] = await accepted({ recipients: [{ email: fresh() }], sandbox: true });
      expect((await record(sandboxed!.id!)).sandbox).to.equal('deliver');
      const [real] = await accepted({ recipients: [{ email: fresh() }] });
      expect((await record(real!.id!)).sandbox).to.equal(null);
    });

    it('refuses an unknown sandbox_result with 400', async () => {
      expect(await refused({ sandbox: true, sandbox_result: 'explode' })).to.match(/sandbox_result/);
    });
  });

  describe('sender domain and scopes', () => {
    it('refuses a sender domain the account does not own with 400', async () => {
      expect(await refused({ from: { email: 'app@not-ours.example' } })).to.match(/not-ours\.example/);
    });

    it('refuses a sender domain whose DNS records are not valid with 400', async () => {
      expect(await refused({ from: { email: 'app@other.example' } })).to.match(/DNS/);
    });

    it('refuses an invalid from address with 400', async () => {
      expect(await refused({ from: { email: 'nobody' } })).to.match(/from\.email/);
    });

    it('answers 403 to a key that may send only from another domain', async () => {
      const key = await bed.key(['messages:send:{other.example}']);
      const email = fresh();
      const res = await bed.send({ recipients: [{ email }] }, { key });
      expect(res.status, JSON.stringify(res.body)).to.equal(403);
      expect(await countTo(email)).to.equal(0);
    });

    it('accepts a key that may send from the sender domain', async () => {
      const key = await bed.key(['messages:send:{example.com}']);
      const res = await bed.send({ recipients: [{ email: fresh() }] }, { key });
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      expect(res.body.data[0].status).to.equal('queued');
    });

    it('answers 403 to a key without any messages:send scope', async () => {
      const key = await bed.key(['messages:read:all', 'domains:read']);
      const res = await bed.send({}, { key });
      expect(res.status, JSON.stringify(res.body)).to.equal(403);
    });

    it('answers 401 without a key', async () => {
      const res = await bed.send({}, { key: null });
      expect(res.status).to.equal(401);
    });
  });

  describe('Idempotency-Key', () => {
    it('replays the same request with the same body and Idempotent-Replayed: true, creating no second message', async () => {
      const email = fresh();
      const headers = { 'idempotency-key': `send-${email}` };
      const first = await bed.send({ recipients: [{ email }] }, { headers });
      expect(first.status).to.equal(202);
      expect(first.headers.get('idempotent-replayed')).to.equal(null);
      const again = await bed.send({ recipients: [{ email }] }, { headers });
      expect(again.status).to.equal(202);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      expect(await countTo(email)).to.equal(1);
    });

    it('answers 422 to the same key with another body and sends nothing for it', async () => {
      const email = fresh();
      const other = fresh();
      const headers = { 'idempotency-key': `send-${email}` };
      expect((await bed.send({ recipients: [{ email }] }, { headers })).status).to.equal(202);
      const changed = await bed.send({ recipients: [{ email: other }] }, { headers });
      expect(changed.status).to.equal(422);
      expect(changed.body.message).to.match(/different request payload/);
      expect(await countTo(other)).to.equal(0);
    });
  });

  describe('request body', () => {
    it('answers 400 "invalid request body" to malformed JSON', async () => {
      const res = await bed.api('POST', bed.messages, { rawBody: '{"from": ', headers: { 'content-type': 'application/json' } });
      expect(res.status).to.equal(400);
      expect(res.body).to.deep.equal({ message: 'invalid request body' });
    });

    it('answers 400 to an unknown field, naming it', async () => {
      expect(await refused({ bogus: 1 })).to.match(/unknown field bogus/);
    });

    it('answers 400 to an unknown field inside a recipient or an attachment', async () => {
      expect(await refused({ recipients: [{ email: fresh(), colour: 'red' }] })).to.match(/unknown field recipients\.0\.colour/);
      expect(await refused({ attachments: [{ data: 'x', file_name: 'x', content_type: 'text/plain', size: 1 }] })).to.match(/unknown field/);
    });

    it('answers 400 to a field of the wrong type', async () => {
      expect(await refused({ tags: 'one-tag' })).to.match(/tags/);
      expect(await refused({ sandbox: 'yes' })).to.match(/sandbox/);
    });
  });
});
