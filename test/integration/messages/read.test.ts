import { expect } from 'chai';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';

const MINUTE = 60_000;

describe('message read API', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let t0: string;
  let t1: string;
  const list = async (query: string, key?: string) => {
    const res = await bed.api('GET', `${bed.messages}?${query}`, key ? { key } : {});
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.data as Array<{ recipient: string; subject: string; sender: string; tags: string[]; status: string; created_at: string }>;
  };
  const recipients = (rows: Array<{ recipient: string }>) => rows.map((r) => r.recipient);

  before(async () => {
    bed = await startMessageBed();
    const second = await bed.create('second.example');
    bed.publish(second);
    expect((await bed.recheck('second.example')).body.dns_valid).to.equal(true);

    t0 = new Date(bed.clock.now()).toISOString();
    expect((await bed.send({ recipients: [{ email: 'a@example.org' }], subject: 'Alpha', tags: ['welcome', 'eu'] })).status).to.equal(202);
    bed.clock.advance(MINUTE);
    expect((await bed.send({ recipients: [{ email: 'b@example.org' }], subject: 'Beta', tags: ['receipt'] })).status).to.equal(202);
    bed.clock.advance(MINUTE);
    t1 = new Date(bed.clock.now()).toISOString();
    expect(
      (await bed.send({ from: { email: 'news@second.example' }, recipients: [{ email: 'c@example.org' }, { email: 'A@Example.org' }], subject: 'Gamma' }))
        .status,
    ).to.equal(202);
    bed.clock.advance(MINUTE);
    const scheduled = await bed.send({
      recipients: [{ email: 'd@example.org' }],
      subject: 'Delta',
      schedule: { first_attempt: new Date(bed.clock.now() + 3_600_000).toISOString() },
    });
    expect((await bed.api('DELETE', `${bed.messages}/${encodeURIComponent(scheduled.body.data[0].id)}/cancel`)).status).to.equal(200);
  });
  after(async () => bed?.stop());

  it('lists every message newest first', async () => {
    expect(recipients(await list(''))).to.deep.equal(['d@example.org', 'A@Example.org', 'c@example.org', 'b@example.org', 'a@example.org']);
  });

  it('filters by recipient (case-insensitively), sender, subject and Message-ID', async () => {
    expect(recipients(await list('recipient=a@example.org'))).to.deep.equal(['A@Example.org', 'a@example.org']);
    expect((await list('sender=news@second.example')).map((m) => m.subject)).to.deep.equal(['Gamma', 'Gamma']);
    expect(recipients(await list('subject=Beta'))).to.deep.equal(['b@example.org']);
    const [beta] = await list('subject=Beta');
    const id = (beta as unknown as { message_id: string }).message_id;
    expect(recipients(await list(`message_id_header=${encodeURIComponent(id)}`))).to.deep.equal(['b@example.org']);
  });

  it('filters by tags (any of them) and by status list', async () => {
    expect(recipients(await list('tags=eu'))).to.deep.equal(['a@example.org']);
    expect(recipients(await list('tags=receipt,welcome'))).to.deep.equal(['b@example.org', 'a@example.org']);
    expect(recipients(await list('status=Cancelled'))).to.deep.equal(['d@example.org']);
    expect(await list('status=Received')).to.have.length(4);
    expect(await list('status=Delivered,Bounced')).to.have.length(0);
    expect(recipients(await list('status=Received&recipient=b@example.org'))).to.deep.equal(['b@example.org']);
  });

  it('filters on the created_at window', async () => {
    expect(recipients(await list(`from_time=${t1}`))).to.deep.equal(['d@example.org', 'A@Example.org', 'c@example.org']);
    expect(recipients(await list(`to_time=${t0}`))).to.deep.equal(['a@example.org']);
    expect(
      recipients(await list(`from_time=${encodeURIComponent(new Date(Date.parse(t0) + MINUTE).toISOString())}&to_time=${encodeURIComponent(t1)}`)),
    ).to.have.members(['b@example.org', 'c@example.org', 'A@Example.org']);
  });

  it('pages with next and previous cursors', async () => {
    const first = await bed.api('GET', `${bed.messages}?limit=2`);
    expect(recipients(first.body.data)).to.deep.equal(['d@example.org', 'A@Example.org']);
    expect(first.body.pagination.has_more).to.equal(true);
    expect(first.body.pagination.previous_cursor).to.equal(undefined);
    const second = await bed.api('GET', `${bed.messages}?limit=2&after=${first.body.pagination.next_cursor}`);
    expect(recipients(second.body.data)).to.deep.equal(['c@example.org', 'b@example.org']);
    const third = await bed.api('GET', `${bed.messages}?limit=2&after=${second.body.pagination.next_cursor}`);
    expect(recipients(third.body.data)).to.deep.equal(['a@example.org']);
    expect(third.body.pagination.has_more).to.equal(false);
    const back = await bed.api('GET', `${bed.messages}?limit=2&before=${second.body.pagination.previous_cursor}`);
    expect(recipients(back.body.data)).to.deep.equal(['d@example.org', 'A@Example.org']);
  });

  it('refuses bad filters with 400', async () => {
    for (const [query, text] of [
      ['status=Sent', 'invalid status'],
      ['from_time=yesterday', 'invalid from_time, provide a valid RFC3339 time string'],
      ['to_time=2026-13-01', 'invalid to_time'],
      [`tags=${Array.from({ length: 21 }, (_, i) => `t${i}`).join(',')}`, 'at most 20'],
      ['limit=0', 'limit'],
      ['sender=not-an-email', 'sender: must be an email address'],
      ['sender=-1', 'sender: must be an email address'],
      ['recipient=%ED%A0%80', 'recipient: must be an email address'],
      ['recipient=%00', 'recipient: must be an email address'],
    ] as const) {
      const res = await bed.api('GET', `${bed.messages}?${query}`);
      expect(res.status, query).to.equal(400);
      expect(res.body.message, query).to.contain(text);
    }
  });

  it('shows a domain-scoped key only the messages of its domains', async () => {
    const key = await bed.key(['messages:read:{second.example}']);
    expect((await list('', key)).map((m) => m.sender)).to.deep.equal(['news@second.example', 'news@second.example']);
    expect(await list('recipient=b@example.org', key)).to.have.length(0);
    const denied = await bed.api('GET', `${bed.messages}?sender=app@example.com`, { key });
    expect(denied.status).to.equal(403);
    const [beta] = await list('subject=Beta');
    const other = await bed.api('GET', `${bed.messages}/${(beta as unknown as { id: string }).id}`, { key });
    expect(other.status).to.equal(404);
    const noScope = await bed.key(['domains:read']);
    expect((await bed.api('GET', bed.messages, { key: noScope })).status).to.equal(403);
  });

  it('gets one message by full Message-ID, by bare UUID, and 404s unknown ones', async () => {
    const [gamma] = await list('subject=Gamma');
    const { id, message_id: header } = gamma as unknown as { id: string; message_id: string };
    const byHeader = await bed.api('GET', `${bed.messages}/${encodeURIComponent(header)}`);
    const byId = await bed.api('GET', `${bed.messages}/${id}`);
    expect(byHeader.status).to.equal(200);
    expect(byId.body.id).to.equal(id);
    expect(byHeader.body.content).to.equal(byId.body.content);
    expect(byId.body.content_parsed.headers['message-id']).to.deep.equal([header]);
    expect(byId.body.content_parsed.headers.to).to.have.length(1);
    expect((await bed.api('GET', `${bed.messages}/01a1fdfb-3448-7586-aa7f-39a2956fbdb2`)).status).to.equal(404);
    expect((await bed.api('GET', `${bed.messages}/${encodeURIComponent('<nobody@example.com>')}`)).status).to.equal(404);
    const bad = await bed.api('GET', `${bed.messages}/not-an-id`);
    expect(bad.status).to.equal(400);
  });

  it('stores a body shared by several recipients once', async () => {
    const res = await bed.send({ recipients: [{ email: 'x1@example.org' }, { email: 'x2@example.org' }, { email: 'x3@example.org' }], subject: 'Shared' });
    expect(res.status).to.equal(202);
    const ids = res.body.data.map((d: { id: string }) => d.id);
    const contents = await Promise.all(
      ids.map(async (id: string) => (await bed.api('GET', `${bed.messages}/${encodeURIComponent(id)}`)).body.content as string),
    );
    // Same body after the per-message head (To, Message-ID)…
    const bodies = contents.map((c) => c.slice(c.indexOf('From:')));
    expect(new Set(bodies).size).to.equal(1);
    // …stored once: three references to one body id.
    const records = await Promise.all(ids.map((id: string) => bed.server.daemon.core.messages.get(bed.server.accountId, id, () => true)));
    expect(new Set(records.map((r) => r.bodyId)).size).to.equal(1);
  });
});
