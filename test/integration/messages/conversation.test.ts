import { expect } from 'chai';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';

const MESSAGE_ID = /^<[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}@example\.com>$/;

interface Entry {
  object: string;
  id: string | null;
  recipient: { email: string; name: string };
  status: string;
  error: string | null;
}

interface FullMessage {
  message_id: string;
  recipient: string;
  subject: string;
  content: string;
  content_parsed: { parts: Array<{ content_type: string; content: string }>; headers: Record<string, string[]> };
}

describe('POST /v2/accounts/{id}/messages/conversation', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let n = 0;
  const fresh = (label = 'c') => `${label}-${++n}@example.org`;
  const addresses = (count: number, label: string) => Array.from({ length: count }, () => ({ email: fresh(label) }));

  before(async () => {
    bed = await startMessageBed();
    await bed.create('other.example');
  });
  after(async () => bed?.stop());
  // The rate limiter runs on the test clock: move it so that every test starts with a full bucket.
  beforeEach(() => bed.clock.advance(5_000));

  async function accepted(fields: Record<string, unknown>): Promise<Entry[]> {
    const res = await bed.converse(fields);
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body.object).to.equal('list');
    return res.body.data as Entry[];
  }

  async function refused(fields: Record<string, unknown>): Promise<string> {
    const res = await bed.converse(fields);
    expect(res.status, JSON.stringify(res.body)).to.equal(400);
    expect(res.body).to.have.keys('message');
    return res.body.message as string;
  }

  const read = async (id: string) => (await bed.read(id)) as FullMessage;

  const countTo = (recipient: string) => bed.countTo(recipient);

  it('answers 202 with one queued entry per recipient across to, cc and bcc, each with its own Message-ID', async () => {
    const to = [{ email: fresh('to'), name: 'To One' }, { email: fresh('to') }];
    const cc = [{ email: fresh('cc'), name: 'Cc One' }];
    const bcc = [{ email: fresh('bcc') }];
    const data = await accepted({ to, cc, bcc });
    expect(data.map((e) => e.recipient)).to.deep.equal([
      { email: to[0]!.email, name: 'To One' },
      { email: to[1]!.email, name: '' },
      { email: cc[0]!.email, name: 'Cc One' },
      { email: bcc[0]!.email, name: '' },
    ]);
    for (const e of data) {
      expect(e).to.include({ object: 'message', status: 'queued', error: null });
      expect(e.id).to.match(MESSAGE_ID);
    }
    expect(new Set(data.map((e) => e.id)).size).to.equal(4);
    for (const e of data) {
      const m = await read(e.id!);
      expect(m.message_id).to.equal(e.id);
      expect(m.content_parsed.headers['message-id']).to.deep.equal([e.id]);
      expect(m.recipient).to.equal(e.recipient.email);
    }
  });

  it('shows every To and Cc address in the headers of every copy, and never the Bcc', async () => {
    const to = [{ email: fresh('to'), name: 'Ann' }, { email: fresh('to') }];
    const cc = [{ email: fresh('cc') }, { email: fresh('cc'), name: 'Carl' }];
    const bcc = [{ email: fresh('bcc') }, { email: fresh('bcc') }];
    const data = await accepted({ to, cc, bcc });
    expect(data).to.have.length(6);
    for (const e of data) {
      const m = await read(e.id!);
      const headers = m.content_parsed.headers;
      expect(headers.to, JSON.stringify(headers)).to.have.length(1);
      expect(headers.cc, JSON.stringify(headers)).to.have.length(1);
      for (const a of to) expect(headers.to![0]).to.include(a.email);
      for (const a of cc) expect(headers.cc![0]).to.include(a.email);
      expect(headers.to![0]).to.include('Ann');
      expect(headers.cc![0]).to.include('Carl');
      expect(headers).to.not.have.property('bcc');
      for (const a of bcc) expect(m.content, `copy for ${e.recipient.email}`).to.not.include(a.email);
    }
  });

  it('sends the same content to everyone in the conversation', async () => {
    const data = await accepted({
      to: [{ email: fresh() }],
      cc: [{ email: fresh() }],
      bcc: [{ email: fresh() }],
      subject: 'Shared',
      text_content: 'Same for all',
    });
    for (const e of data) {
      const m = await read(e.id!);
      expect(m.subject).to.equal('Shared');
      expect(m.content_parsed.parts.find((p) => p.content_type === 'text/plain')?.content).to.equal('Same for all');
    }
  });

  it('writes no Cc header when there is no cc', async () => {
    const [e] = await accepted({ to: [{ email: fresh() }] });
    expect((await read(e!.id!)).content_parsed.headers).to.not.have.property('cc');
  });

  describe('recipient limits', () => {
    it('accepts 50 addresses in to', async () => {
      expect(await accepted({ to: addresses(50, 'to50') })).to.have.length(50);
    });

    it('accepts 50 recipients combined (30 to + 20 cc)', async () => {
      expect(await accepted({ to: addresses(30, 'to'), cc: addresses(20, 'cc') })).to.have.length(50);
    });

    for (const field of ['to', 'cc', 'bcc']) {
      it(`refuses 51 addresses in ${field} with 400`, async () => {
        const fields: Record<string, unknown> = { [field]: addresses(51, field) };
        expect(await refused(fields)).to.match(/50/);
      });

      it(`refuses an empty ${field} array with 400`, async () => {
        expect(await refused({ [field]: [] })).to.match(new RegExp(`${field}`));
      });
    }

    it('refuses more than 50 recipients combined (30 to + 21 cc) with 400 and stores nothing', async () => {
      const to = addresses(30, 'to');
      expect(await refused({ to, cc: addresses(21, 'cc') })).to.match(/50/);
      expect(await countTo(to[0]!.email)).to.equal(0);
    });

    it('counts bcc in the combined limit (20 to + 20 cc + 11 bcc)', async () => {
      expect(await refused({ to: addresses(20, 'to'), cc: addresses(20, 'cc'), bcc: addresses(11, 'bcc') })).to.match(/50/);
    });

    it('refuses a request without to with 400', async () => {
      expect(await refused({ to: undefined, cc: [{ email: fresh() }] })).to.match(/to/);
    });

    for (const email of ['a,b@example.org', 'a>b@example.org']) {
      it(`refuses ${email} in to with 400: it would change the meaning of the To header`, async () => {
        expect(await refused({ to: [{ email }] })).to.match(/to\[0\]/);
      });
    }

    it('refuses an invalid address in cc with 400 naming it', async () => {
      expect(await refused({ cc: [{ email: fresh() }, { email: 'not an address' }] })).to.match(/cc\[1\]/);
    });
  });

  it('gives an address repeated across to and cc an error entry for its second occurrence', async () => {
    const twice = fresh('twice');
    const other = fresh();
    const data = await accepted({ to: [{ email: twice }, { email: other }], cc: [{ email: twice.toUpperCase() }] });
    expect(data.map((e) => e.status)).to.deep.equal(['queued', 'queued', 'error']);
    expect(data[2]).to.include({ id: null });
    expect(data[2]!.error)
      .to.be.a('string')
      .and.match(/duplicate/);
    expect(await countTo(twice)).to.equal(1);
  });

  describe('headers', () => {
    it('refuses a cc header together with the cc field with 400', async () => {
      expect(await refused({ cc: [{ email: fresh() }], headers: { Cc: 'hidden@example.org' } })).to.match(/cc/i);
    });

    it('accepts a cc header when the cc field is absent', async () => {
      const [e] = await accepted({ headers: { Cc: 'shown@example.org' } });
      expect((await read(e!.id!)).content_parsed.headers.cc).to.deep.equal(['shown@example.org']);
    });

    it('refuses a reply-to header together with the reply_to field with 400', async () => {
      expect(await refused({ reply_to: { email: 'help@example.com' }, headers: { 'reply-to': 'x@example.com' } })).to.match(/reply/i);
    });

    it('refuses a Bcc header with 400: bcc addresses never appear in headers', async () => {
      expect(await refused({ headers: { Bcc: 'hidden@example.org' } })).to.match(/Bcc/);
    });

    it('ignores a message-id header', async () => {
      const [e] = await accepted({ headers: { 'message-id': '<mine@client.example>' } });
      const m = await read(e!.id!);
      expect(m.content_parsed.headers['message-id']).to.deep.equal([e!.id]);
      expect(m.content).to.not.include('mine@client.example');
    });
  });

  describe('no templating', () => {
    it('sends {{ … }} literally', async () => {
      const [e] = await accepted({ subject: 'Hi {{ name }}', text_content: 'Dear {{ name }}', html_content: '<p>{{ name }}</p>' });
      const m = await read(e!.id!);
      expect(m.subject).to.equal('Hi {{ name }}');
      expect(m.content_parsed.parts.find((p) => p.content_type === 'text/plain')?.content).to.equal('Dear {{ name }}');
      expect(m.content_parsed.parts.find((p) => p.content_type === 'text/html')?.content).to.equal('<p>{{ name }}</p>');
    });

    it('refuses substitutions as an unknown field with 400', async () => {
      expect(await refused({ substitutions: { name: 'Ada' } })).to.match(/unknown field substitutions/);
    });

    it('refuses recipients as an unknown field with 400', async () => {
      expect(await refused({ recipients: [{ email: fresh() }] })).to.match(/unknown field recipients/);
    });
  });

  it('refuses a message with neither text_content nor html_content with 400', async () => {
    expect(await refused({ text_content: null, html_content: null })).to.match(/text_content or html_content/);
  });

  it('refuses a sender domain whose DNS records are not valid with 400', async () => {
    expect(await refused({ from: { email: 'app@other.example' } })).to.match(/DNS/);
  });

  it('authorises on the domain of from.email: 403 for a key of another domain, 202 for the sender domain', async () => {
    const other = await bed.key(['messages:send:{other.example}']);
    const denied = await bed.converse({}, { key: other });
    expect(denied.status, JSON.stringify(denied.body)).to.equal(403);
    const own = await bed.key(['messages:send:{example.com}']);
    const allowed = await bed.converse({}, { key: own });
    expect(allowed.status, JSON.stringify(allowed.body)).to.equal(202);
  });

  it('replays a request with the same Idempotency-Key without sending again', async () => {
    const email = fresh();
    const headers = { 'idempotency-key': `conv-${email}` };
    const first = await bed.converse({ to: [{ email }] }, { headers });
    const again = await bed.converse({ to: [{ email }] }, { headers });
    expect(again.status).to.equal(202);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body).to.deep.equal(first.body);
    expect(await countTo(email)).to.equal(1);
  });
});
