import { expect } from 'chai';
import { createTransport, type SendMailOptions } from 'nodemailer';
import { EventsRepo } from '../../../src/store/events-repo.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { RawSmtp } from '../../helpers/raw-smtp.ts';
import { assertWebhookPayload } from '../../helpers/webhook-contract.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/**
 * Routes: the API (every operation, validated against the contract by the harness), and mail to
 * the inbound MX forwarded to the route's URL, signed with its secret and verified by the
 * `standardwebhooks` package, in the contract's `message.routing` shape.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

describe('routes: API and forwarding of inbound mail', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let receiver: WebhookReceiver;
  let port: number;

  beforeEach(async () => {
    receiver = await WebhookReceiver.start();
    bed = await startMessageBed({ ...POLLING, smtp: { inbound: { enabled: true, port: 0 } }, webhooks: { allow_networks: ['127.0.0.0/8'] } });
    port = bed.server.daemon.parts.inbound.port!;
  });
  afterEach(async () => {
    await bed.stop();
    await receiver.stop();
  });

  const routesPath = () => `/v2/accounts/${bed.server.accountId}/routes`;

  async function createRoute(path: string, body: Record<string, unknown>): Promise<{ id: string; secret: string }> {
    const res = await bed.api('POST', routesPath(), { body: { name: path, url: receiver.url(path), ...body } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    receiver.secrets.set(path, res.body.secret);
    return { id: res.body.id, secret: res.body.secret };
  }

  async function send(fields: Partial<SendMailOptions>): Promise<string> {
    const info = await createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true }).sendMail({
      from: 'Customer <c@example.net>',
      subject: 'Help',
      text: 'I need help.\n\nOn Mon, 6 May 2024, App <app@example.com> wrote:\n> Welcome!\n',
      ...fields,
    });
    return info.response;
  }

  it('creates, reads, lists, updates and deletes routes; the secret is shown once', async () => {
    const created = await bed.api('POST', routesPath(), {
      body: { name: 'Support', url: receiver.url('/s'), recipient: 'Support@Example.com', attachments: true },
    });
    expect(created.status).to.equal(201);
    expect(created.body).to.include({
      object: 'route',
      recipient: 'support@example.com',
      attachments: true,
      headers: false,
      group_by_message_id: false,
      strip_replies: false,
      enabled: true,
      success_count: 0,
      last_request_at: null,
    });
    expect(created.body.secret).to.match(/^aha-rsec-[A-Za-z0-9]{64}$/);
    const got = await bed.api('GET', `${routesPath()}/${created.body.id}`);
    expect(got.body).to.not.have.property('secret');
    const updated = await bed.api('PUT', `${routesPath()}/${created.body.id}`, { body: { name: null, enabled: false, recipient: 'ticket-*@example.com' } });
    expect(updated.body).to.include({ name: 'Support', enabled: false, recipient: 'ticket-*@example.com' });
    const list = await bed.api('GET', routesPath());
    expect(list.body.data.map((r: { id: string }) => r.id)).to.deep.equal([created.body.id]);
    expect((await bed.api('GET', `${routesPath()}?domain=example.org`)).body.data).to.deep.equal([]);
    expect((await bed.api('DELETE', `${routesPath()}/${created.body.id}`)).status).to.equal(200);
    expect((await bed.api('GET', `${routesPath()}/${created.body.id}`)).status).to.equal(404);
  });

  it('replays an idempotent create with its secret to the same key', async () => {
    const headers = { 'idempotency-key': 'route-create-1' };
    const first = await bed.api('POST', routesPath(), { headers, body: { name: 'r', url: receiver.url('/r'), recipient: '*@example.com' } });
    const again = await bed.api('POST', routesPath(), { headers, body: { name: 'r', url: receiver.url('/r'), recipient: '*@example.com' } });
    expect(again.status).to.equal(201);
    expect(again.body.secret).to.equal(first.body.secret);
    expect((await bed.api('GET', routesPath())).body.data).to.have.length(1);
  });

  it('refuses bad patterns, foreign domains, private URLs and junk with 4xx and a message', async () => {
    const bad = [
      { recipient: '' },
      { recipient: 'no-at-sign' },
      { recipient: 'a*b*c@example.com' },
      { recipient: 'mid*dle@example.com' },
      { recipient: 'x@not-mine.example' },
      { recipient: `${'a'.repeat(250)}@example.com` },
      { recipient: 'a b@example.com' },
      { url: 'http://10.0.0.1/hook' },
      { url: 'http://169.254.169.254/' },
      { url: 'ftp://example.net/' },
      { url: 'http://[::1]/' },
      { name: '' },
      { name: 'x'.repeat(300) },
      { attachments: 'yes' },
      { recipient: ['a@example.com'] },
      { extra: 1 },
    ];
    for (const fields of bad) {
      const res = await bed.api('POST', routesPath(), { body: { name: 'r', url: 'https://hooks.example.net/r', recipient: 'r@example.com', ...fields } });
      expect(res.status, JSON.stringify(fields)).to.be.within(400, 499);
      expect(res.body.message, JSON.stringify(fields)).to.be.a('string');
    }
    expect((await bed.api('GET', routesPath())).body.data).to.deep.equal([]);
  });

  it('domain-scoped keys: list needs domain, and only their domains are reachable', async () => {
    const { id } = await createRoute('/a', { recipient: 'a@example.com' });
    const key = await bed.key(['routes:read:{example.com}', 'routes:write:{example.com}']);
    expect((await bed.api('GET', routesPath(), { key })).status).to.equal(400);
    expect((await bed.api('GET', `${routesPath()}?domain=example.com`, { key })).body.data.map((r: { id: string }) => r.id)).to.deep.equal([id]);
    expect((await bed.api('GET', `${routesPath()}?domain=other.example`, { key })).status).to.equal(403);
    expect((await bed.api('GET', `${routesPath()}/${id}`, { key })).status).to.equal(200);
    const second = await bed.create('second.test');
    expect(second.domain).to.equal('second.test');
    const other = await bed.key(['routes:read:{second.test}']);
    expect((await bed.api('GET', `${routesPath()}/${id}`, { key: other })).status).to.equal(403);
  });

  it("forwards a message with inline and attached parts, headers and the stripped reply, signed, in the contract's shape", async () => {
    const route = await createRoute('/support', { recipient: 'support@example.com', attachments: true, headers: true, strip_replies: true });
    const response = await send({
      to: 'support@example.com',
      html: '<p>I need help.</p><img src="cid:logo-123">',
      headers: { 'X-Mailer': 'TestMailer' },
      attachments: [
        { filename: 'logo.png', content: PNG, cid: 'logo-123' },
        { filename: 'notes.txt', content: 'some notes' },
      ],
    });
    expect(response).to.match(/^250 /);
    await receiver.until((r) => r.length === 1);
    const [d] = receiver.received;
    expect(d!.payload, d!.error).to.not.equal(null);
    const p = d!.payload!;
    assertWebhookPayload(p);
    expect(Object.keys(p)).to.deep.equal(['type', 'route_id', 'timestamp', 'data']);
    expect(p).to.include({ type: 'message.routing', route_id: route.id });
    expect(p.data).to.include({
      from: 'Customer <c@example.net>',
      to: 'support@example.com',
      subject: 'Help',
      spam_score: 0,
      bounce: false,
      reply_from_plain_body: 'I need help.',
    });
    for (const key of ['id', 'reply_to', 'cc', 'date', 'in_reply_to', 'references', 'auto_submitted', 'html_body', 'plain_body', 'message_id', 'size'])
      expect(p.data, key).to.have.property(key);
    const attachments = p.data.attachments as Array<Record<string, string>>;
    expect(attachments.map((a) => [a.filename, a.content_id, a.disposition])).to.deep.equal([
      ['logo.png', 'logo-123', 'inline'],
      ['notes.txt', '', 'attachment'],
    ]);
    expect(Buffer.from(attachments[0]!.data!, 'base64').equals(PNG)).to.equal(true);
    expect(p.data.headers['X-Mailer']).to.equal('TestMailer');
    expect(p.data.headers['Authentication-Results']).to.be.a('string');
    const events = await new EventsRepo(bed.server.daemon.core.store).recent(bed.server.accountId, 10, 'message.reception');
    expect(events[0]!.data).to.include({ recipient: 'support@example.com', subject: 'Help', id: p.data.id });
    const counted = await bed.api('GET', `${routesPath()}/${route.id}`);
    expect(counted.body).to.include({ success_count: 1, error_count: 0 });
  });

  it('without attachments or headers those keys are [] and absent', async () => {
    await createRoute('/plain', { recipient: 'plain@example.com' });
    await send({ to: 'plain@example.com', attachments: [{ filename: 'x.txt', content: 'x' }] });
    await receiver.until((r) => r.length === 1);
    const p = receiver.received[0]!.payload!;
    expect(p.data.attachments).to.deep.equal([]);
    expect(p.data).to.not.have.property('headers');
    expect(p.data.reply_from_plain_body).to.equal('');
  });

  it('matches every pattern kind; one POST per recipient, or one for all with group_by_message_id', async () => {
    await createRoute('/tickets', { recipient: 'ticket-*@example.com' });
    await createRoute('/support', { recipient: '*-support@example.com' });
    await createRoute('/all', { recipient: '*@example.com', group_by_message_id: true });
    await send({ to: ['ticket-1@example.com', 'ticket-2@example.com', 'eu-support@example.com'] });
    await receiver.until((r) => r.length === 4);
    await new Promise((r) => setTimeout(r, 200));
    const by = (path: string) =>
      receiver
        .verified(path)
        .map((d) => d.payload!.data.to as string)
        .sort();
    expect(by('/tickets')).to.deep.equal(['ticket-1@example.com', 'ticket-2@example.com']);
    expect(by('/support')).to.deep.equal(['eu-support@example.com']);
    expect(by('/all')).to.have.length(1);
    expect(by('/all')[0]).to.contain('ticket-1@example.com').and.contain('eu-support@example.com');
  });

  it("refuses recipients no enabled route matches, and another account's domain, with 550", async () => {
    await createRoute('/only', { recipient: 'only@example.com' });
    await createRoute('/off', { recipient: 'off@example.com', enabled: false });
    const { client } = await RawSmtp.open(port, { localAddress: '127.0.0.1' });
    try {
      await client.command('EHLO client.example.net');
      await client.command('MAIL FROM:<c@example.net>');
      for (const [to, reason] of [
        ['nobody@example.com', 'no route'],
        ['off@example.com', 'no route'],
        ['x@elsewhere.example', 'relay access denied'],
      ] as const) {
        const reply = await client.command(`RCPT TO:<${to}>`);
        expect(reply.code, to).to.equal(550);
        expect(reply.raw, to).to.contain(reason);
      }
      expect((await client.command('RCPT TO:<only@example.com>')).code).to.equal(250);
    } finally {
      client.close();
    }
  });

  it('route POSTs wait in the store and show in postilion queue status; a failing endpoint is retried', async () => {
    await createRoute('/down', { recipient: 'down@example.com' });
    receiver.answer = () => 500;
    await send({ to: 'down@example.com' });
    await receiver.until((r) => r.length === 1);
    await new Promise((r) => setTimeout(r, 200));
    const { QueueAdmin } = await import('../../../src/control/queue-admin.ts');
    const { jobStore } = await import('../../../src/assemblies/core.ts');
    const core = bed.server.daemon.core;
    const status = await new QueueAdmin({
      messages: core.messages,
      repo: core.messagesRepo,
      events: core.events,
      clock: core.clock,
      jobs: jobStore(core),
      daemon: null,
    }).status();
    expect(
      status.jobs.map(({ next_attempt_at: _at, ...f }) => f),
      JSON.stringify(status.jobs),
    ).to.deep.equal([{ kind: 'route', destination: new URL(receiver.url('/')).origin, pending: 1, due: 0, held: 0, parked: 0, failed: 0 }]);
    receiver.answer = () => 204;
    bed.clock.advance(2000);
    await bed.server.daemon.parts.jobs.engine.wake();
    await receiver.until((r) => r.length === 2);
    expect(receiver.received[0]!.headers['webhook-id']).to.equal(receiver.received[1]!.headers['webhook-id']);
  });

  it('scores the message with spamd when one is configured', async () => {
    const { createServer } = await import('node:net');
    const spamd = createServer((socket) => {
      socket.on('data', () => undefined);
      socket.on('end', () => socket.end('SPAMD/1.1 0 EX_OK\r\nSpam: True ; 6.2 / 5.0\r\n\r\n'));
    });
    await new Promise<void>((done) => spamd.listen(0, '127.0.0.1', () => done()));
    await bed.stop();
    bed = await startMessageBed({
      ...POLLING,
      smtp: { inbound: { enabled: true, port: 0, spamd: `127.0.0.1:${(spamd.address() as { port: number }).port}` } },
      webhooks: { allow_networks: ['127.0.0.0/8'] },
    });
    port = bed.server.daemon.parts.inbound.port!;
    try {
      await createRoute('/scored', { recipient: 'scored@example.com' });
      await send({ to: 'scored@example.com' });
      await receiver.until((r) => r.length === 1);
      expect(receiver.received[0]!.payload!.data.spam_score).to.equal(6.2);
    } finally {
      await new Promise<void>((done) => spamd.close(() => done()));
    }
  });
});
