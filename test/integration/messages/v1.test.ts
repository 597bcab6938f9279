import { expect } from 'chai';
import { call, type CallResult } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { assertMatchesV1Contract } from '../../helpers/openapi-v1.ts';

interface FullMessage {
  message_id: string;
  recipient: string;
  sender: string;
  subject: string;
  content: string;
  content_parsed: {
    parts: Array<{ content_type: string; content: string }>;
    attachments: Array<{ filename: string; content: string; content_type: string; content_id: string }>;
    headers: Record<string, string[]>;
  };
}

describe('POST /v1/email/send (legacy)', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let v1Key: string;
  let n = 0;
  const fresh = (label = 'v') => `${label}-${++n}@example.org`;

  const body = (recipients: Array<{ email: string; name?: string }>, content: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
    from: { email: 'app@example.com', name: 'App' },
    recipients,
    content: { subject: 'Legacy hello', text_body: 'Plain v1', html_body: '<p>HTML v1</p>', ...content },
    ...extra,
  });

  before(async () => {
    bed = await startMessageBed();
    await bed.create('other.example');
    v1Key = await bed.v1Key();
  });
  after(async () => bed?.stop());
  // The rate limiter runs on the test clock: move it so that every test starts with a full bucket.
  beforeEach(() => bed.clock.advance(5_000));

  /** POST /v1/email/send, the response checked against openapi-v1.yaml. */
  async function send(payload: unknown, key = v1Key): Promise<CallResult> {
    const res = await bed.v1(payload, key);
    assertMatchesV1Contract(res.status, res.body);
    return res;
  }

  async function refused(payload: unknown, status = 400, key = v1Key): Promise<string> {
    const res = await send(payload, key);
    expect(res.status, JSON.stringify(res.body)).to.equal(status);
    expect(res.body).to.have.keys('status');
    expect(res.body.status).to.be.a('string').and.not.equal('');
    return res.body.status as string;
  }

  async function listed(recipient: string): Promise<Array<{ message_id: string; sender: string; subject: string }>> {
    const res = await bed.api('GET', `${bed.messages}?recipient=${encodeURIComponent(recipient)}`);
    expect(res.status).to.equal(200);
    return res.body.data;
  }

  async function read(id: string): Promise<FullMessage> {
    const res = await bed.api('GET', `${bed.messages}/${encodeURIComponent(id)}`);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body as FullMessage;
  }

  it('checks bodies against the v1 contract (a malformed 201 body is refused)', () => {
    expect(() => assertMatchesV1Contract(201, { success_count: 'one' })).to.throw(/v1 contract/);
    expect(() => assertMatchesV1Contract(400, { status: 7 })).to.throw(/v1 contract/);
    expect(() => assertMatchesV1Contract(500, { status: 'x' })).to.throw(/does not declare/);
  });

  it('answers 201 with success_count, fail_count, failed_recipients and errors', async () => {
    const res = await send(body([{ email: fresh(), name: 'One' }, { email: fresh() }]));
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body).to.deep.equal({ success_count: 2, fail_count: 0, failed_recipients: [], errors: [] });
  });

  it('stores one message per recipient, readable through the v2 list and get', async () => {
    const a = fresh();
    const b = fresh();
    expect((await send(body([{ email: a, name: 'Ada' }, { email: b }]))).status).to.equal(201);
    const [summary, ...more] = await listed(a);
    expect(more).to.have.length(0);
    expect(summary).to.include({ sender: 'app@example.com', subject: 'Legacy hello' });
    expect(summary!.message_id).to.match(/^<[0-9a-f-]{36}@example\.com>$/);
    const m = await read(summary!.message_id);
    expect(m.recipient).to.equal(a);
    expect(m.content_parsed.headers.to).to.deep.equal([`"Ada" <${a}>`]);
    expect(m.content).to.not.include(b);
    expect(m.content_parsed.parts.find((p) => p.content_type === 'text/plain')?.content).to.equal('Plain v1');
    expect(m.content_parsed.parts.find((p) => p.content_type === 'text/html')?.content).to.equal('<p>HTML v1</p>');
    const [other] = await listed(b);
    expect(other!.message_id).to.not.equal(summary!.message_id);
  });

  it('counts an invalid recipient in fail_count, listing it with "addr: reason" in errors', async () => {
    const good = fresh();
    const res = await send(body([{ email: good }, { email: 'not-an-address' }]));
    expect(res.status).to.equal(201);
    expect(res.body).to.include({ success_count: 1, fail_count: 1 });
    expect(res.body.failed_recipients).to.deep.equal(['not-an-address']);
    expect(res.body.errors).to.have.length(1);
    expect(res.body.errors[0]).to.match(/^not-an-address: \S/);
    expect(await listed(good)).to.have.length(1);
  });

  it('accepts 100 recipients', async () => {
    const res = await send(body(Array.from({ length: 100 }, () => ({ email: fresh('h') }))));
    expect(res.status).to.equal(201);
    expect(res.body).to.include({ success_count: 100, fail_count: 0 });
  });

  it('refuses 0 recipients with 400 {status}', async () => {
    await refused(body([]));
  });

  it('refuses 101 recipients with 400 {status} and sends to none', async () => {
    const recipients = Array.from({ length: 101 }, () => ({ email: fresh('over') }));
    expect(await refused(body(recipients))).to.match(/100/);
    expect(await listed(recipients[0]!.email)).to.have.length(0);
  });

  it('refuses a message with neither text_body nor html_body with 400 {status}', async () => {
    const email = fresh();
    await refused(body([{ email }], { text_body: undefined, html_body: undefined }));
    await refused(body([{ email }], { text_body: '', html_body: null }));
    expect(await listed(email)).to.have.length(0);
  });

  it('accepts a text-only message', async () => {
    const res = await send(body([{ email: fresh() }], { html_body: undefined }));
    expect(res.status).to.equal(201);
    expect(res.body.success_count).to.equal(1);
  });

  it('refuses a sender domain the account does not own with 400 {status}', async () => {
    await refused({ ...body([{ email: fresh() }]), from: { email: 'app@not-ours.example' } });
  });

  it('refuses a sender domain whose DNS records are not valid with 400 {status}', async () => {
    await refused({ ...body([{ email: fresh() }]), from: { email: 'app@other.example' } });
  });

  it('refuses malformed JSON with 400 {status}', async () => {
    const res = await call(bed.server, 'POST', '/v1/email/send', {
      key: null,
      rawBody: '{"from":',
      headers: { 'x-api-key': v1Key, 'content-type': 'application/json' },
      operationId: null,
    });
    assertMatchesV1Contract(res.status, res.body);
    expect(res.status).to.equal(400);
    expect(res.body).to.have.keys('status');
  });

  it('refuses a body that is not JSON by Content-Type with 400 {status}', async () => {
    const res = await call(bed.server, 'POST', '/v1/email/send', {
      key: null,
      rawBody: 'from=app@example.com',
      headers: { 'x-api-key': v1Key, 'content-type': 'application/x-www-form-urlencoded' },
      operationId: null,
    });
    assertMatchesV1Contract(res.status, res.body);
    expect(res.status).to.equal(400);
    expect(res.body.status).to.match(/application\/json/);
  });

  it('ignores fields v1 never had instead of refusing them', async () => {
    const res = await send(body([{ email: fresh() }], { tags: ['x'] }, { sandbox: true }));
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.success_count).to.equal(1);
  });

  describe('content', () => {
    it('makes an attachment with any content_id inline: Content-ID present, multipart/related', async () => {
      const email = fresh();
      const res = await send(
        body([{ email }], {
          html_body: '<img src="cid:my-image">',
          attachments: [
            {
              data: 'R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7',
              base64: true,
              content_type: 'image/gif',
              file_name: 'pixel.gif',
              content_id: 'my-image',
            },
          ],
        }),
      );
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      const m = await read((await listed(email))[0]!.message_id);
      expect(m.content).to.include('Content-ID: <my-image>');
      expect(m.content).to.match(/Content-Type: multipart\/related/);
      expect(m.content_parsed.attachments[0]).to.include({ filename: 'pixel.gif', content_type: 'image/gif', content_id: '<my-image>' });
    });

    it('keeps an attachment without content_id an ordinary attachment with the decoded data', async () => {
      const email = fresh();
      expect((await send(body([{ email }], { attachments: [{ data: 'plain text file', content_type: 'text/plain', file_name: 'a.txt' }] }))).status).to.equal(
        201,
      );
      const m = await read((await listed(email))[0]!.message_id);
      expect(m.content).to.not.match(/Content-ID:/i);
      expect(Buffer.from(m.content_parsed.attachments[0]!.content, 'base64').toString()).to.equal('plain text file');
    });

    it('adds custom headers and Reply-To', async () => {
      const email = fresh();
      const res = await send(body([{ email }], { headers: { 'X-Ticket': '42' }, reply_to: { email: 'help@example.com' } }));
      expect(res.status).to.equal(201);
      const headers = (await read((await listed(email))[0]!.message_id)).content_parsed.headers;
      expect(headers['x-ticket']).to.deep.equal(['42']);
      expect(headers['reply-to']).to.deep.equal(['help@example.com']);
    });

    it('keeps a recipient name with CR/LF inside the To header: it cannot add a header of its own', async () => {
      const email = fresh();
      expect((await send(body([{ email, name: 'Eve\r\nX-Injected: yes' }]))).status).to.equal(201);
      const m = await read((await listed(email))[0]!.message_id);
      expect(m.content_parsed.headers).to.not.have.property('x-injected');
      expect(m.content).to.not.match(/^X-Injected:/m);
    });

    it('refuses a header with a line break in its value with 400 {status}', async () => {
      await refused(body([{ email: fresh() }], { headers: { 'X-Ticket': '42\r\nBcc: victim@example.org' } }));
    });
  });

  describe('authentication', () => {
    it('refuses a v2 key in X-Api-Key with 403 {status: "invalid credentials"}', async () => {
      const res = await send(body([{ email: fresh() }]), bed.server.adminKey);
      expect(res.status).to.equal(403);
      expect(res.body).to.deep.equal({ status: 'invalid credentials' });
    });

    it('refuses a request without X-Api-Key with 403 {status: "invalid credentials"}', async () => {
      const res = await call(bed.server, 'POST', '/v1/email/send', { key: null, body: body([{ email: fresh() }]), operationId: null });
      assertMatchesV1Contract(res.status, res.body);
      expect(res.status).to.equal(403);
      expect(res.body).to.deep.equal({ status: 'invalid credentials' });
    });

    it('refuses an unknown key of the right shape with 403', async () => {
      const res = await send(body([{ email: fresh() }]), `aha-sk-${'x'.repeat(64)}`);
      expect(res.status).to.equal(403);
      expect(res.body).to.deep.equal({ status: 'invalid credentials' });
    });

    it('answers 401 to a v1 key used as a Bearer token on /v2', async () => {
      const list = await bed.api('GET', bed.messages, { key: v1Key });
      expect(list.status).to.equal(401);
      const sent = await bed.send({ recipients: [{ email: fresh() }] }, { key: v1Key });
      expect(sent.status).to.equal(401);
    });

    it('refuses a v1 key that may send only from another domain with 403 {status}', async () => {
      const key = await bed.v1Key(['messages:send:{other.example}']);
      const email = fresh();
      await refused(body([{ email }]), 403, key);
      expect(await listed(email)).to.have.length(0);
    });

    it('accepts a v1 key scoped to the sender domain', async () => {
      const key = await bed.v1Key(['messages:send:{example.com}']);
      const res = await send(body([{ email: fresh() }]), key);
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
    });
  });
});
