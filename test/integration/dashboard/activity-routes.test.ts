import { expect } from 'chai';
import { createTransport } from 'nodemailer';
import { dashboardRoutes } from '../../../src/dashboard/activity.ts';
import { sendTestEvent } from '../../../src/webhooks/test-event.ts';
import { activeSelector, eventually, otherAccount } from '../../helpers/domains.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';
import { ask, mountRoutes } from './route-mount.ts';

/**
 * The dashboard's account reads and actions over a running daemon: a message delivered to a
 * loopback MX with its events and the webhook deliveries they caused (to a receiver that
 * verifies each request), a test event, a domain's DKIM keys; never another account's.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };

/** The routes over a bed's daemon. */
function routesOf(bed: MessageBed) {
  const { daemon } = bed.server;
  const core = daemon.core;
  const { jobs } = daemon.parts;
  return dashboardRoutes({
    messages: core.messages,
    events: core.eventsRepo,
    domains: core.domains,
    dnsChecker: core.dnsChecker,
    webhooks: core.webhooks,
    routes: core.routes,
    attempts: jobs.attempts,
    clock: core.clock,
    sendTestEvent: (account, webhook) =>
      sendTestEvent(
        { store: core.store, jobs: core.jobs, webhooks: core.webhooks, clock: core.clock, notify: (ms) => jobs.engine.notify(ms) },
        account,
        webhook,
      ),
  });
}

describe('dashboard activity routes', function () {
  this.timeout(60_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let receiver: WebhookReceiver;
  let mount: { url: string; close: () => Promise<void> };
  let base: string;
  const get = (path: string, key = bed.server.adminKey) => ask(mount.url, key, 'GET', `/ui/api/dashboard/accounts/${bed.server.accountId}${path}`);
  const post = (path: string, key = bed.server.adminKey) => ask(mount.url, key, 'POST', `/ui/api/dashboard/accounts/${bed.server.accountId}${path}`, {});

  beforeEach(async () => {
    sink = await startSink();
    receiver = await WebhookReceiver.start();
    bed = await startMessageBed({ ...POLLING, delivery: { enabled: true, mx_port: sink.port }, webhooks: { allow_networks: ['127.0.0.0/8'] } });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
    mount = await mountRoutes(bed.server.daemon.core, routesOf(bed));
    base = `/v2/accounts/${bed.server.accountId}`;
  });

  afterEach(async () => {
    await mount?.close();
    await bed?.stop();
    await sink?.close();
    await receiver?.stop();
  });

  async function createWebhook(path: string, flags: Record<string, boolean>): Promise<string> {
    const res = await bed.api('POST', `${base}/webhooks`, { body: { name: path, url: receiver.url(path), scope: 'global', ...flags } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    receiver.secrets.set(path, res.body.secret);
    return res.body.id as string;
  }

  it("shows a message's events and attempts in order, with the remote reply, and the webhook deliveries its events caused", async () => {
    const hook = await createWebhook('/hook', { on_reception: true, on_delivered: true });
    const sent = await bed.send({ recipients: [{ email: 'ok@example.org' }] });
    expect(sent.status).to.equal(202);
    // The 202 names each message by its Message-ID, <uuid@domain>.
    const header = sent.body.data[0].id as string;
    const id = header.slice(1, header.indexOf('@'));
    await bed.until(id, 'Delivered');
    await receiver.until((r) => r.filter((d) => d.payload?.type === 'message.delivered').length === 1);
    let activity: { status: number; body: any } = { status: 0, body: null }; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON asserted below
    await eventually(async () => {
      activity = await get(`/messages/${id}/activity`);
      return activity.body?.webhook_deliveries?.length === 2;
    });
    expect(activity.status).to.equal(200);
    const { body } = activity;
    // The test's clock stands still: at one time an attempt comes before the events (as `postilion messages` orders them).
    expect(body.trace.map((e: { kind: string; what: string }) => `${e.kind} ${e.what}`)).to.deep.equal([
      'attempt Delivered',
      'event message.reception',
      'event message.delivered',
    ]);
    const attempt = body.trace[0];
    expect(attempt.remote_reply).to.match(/^mx1.example.org: 250 /);
    expect(body.remote_reply).to.equal(attempt.remote_reply);
    expect(attempt).to.have.property('tls');
    expect(body.dkim_selector).to.equal(activeSelector(bed.domain));
    expect(body).to.not.have.property('dkim_selector_is_current');
    expect(body.schedule).to.equal(null);
    expect(body.cancellable).to.equal(false);
    expect(body.opens).to.deep.equal([]);
    expect(body.clicks).to.deep.equal([]);
    expect(body.webhook_deliveries.map((d: { event_type: string }) => d.event_type)).to.deep.equal(['message.reception', 'message.delivered']);
    for (const d of body.webhook_deliveries) {
      expect(d).to.include({ webhook_id: hook, status: 'delivered', response_status: 204, attempts: 0, error: null });
      expect(d.response_ms).to.be.a('number');
    }

    // Another account: its key is refused the path; the message is not found in its own account.
    const other = await otherAccount(bed);
    const foreign = await ask(mount.url, other.key, 'GET', `/ui/api/dashboard/accounts/${other.accountId}/messages/${id}/activity`);
    expect(foreign.status).to.equal(404);
    expect((await get(`/messages/${id}/activity`, other.key)).status).to.equal(401);
    // A key that reads another domain's messages does not find this one; one of its own domain does.
    await bed.create('second.example');
    expect((await get(`/messages/${id}/activity`, await bed.key(['messages:read:{second.example}']))).status).to.equal(404);
    expect((await get(`/messages/${id}/activity`, await bed.key(['messages:read:{example.com}']))).status).to.equal(200);
    // A key without messages:read gets the scope gate's 403.
    expect((await get(`/messages/${id}/activity`, await bed.key(['domains:read']))).status).to.equal(403);
  });

  it('names the selector that signed a message, still after the domain rotated its key, and the new one for mail sent since', async () => {
    const send = async (email: string) => {
      const sent = await bed.send({ recipients: [{ email }] });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
      const header = sent.body.data[0].id as string;
      const id = header.slice(1, header.indexOf('@'));
      await bed.until(id, 'Delivered');
      return id;
    };
    const before = await send('before@example.org');
    const old = activeSelector(bed.domain);
    expect((await get(`/messages/${before}/activity`)).body.dkim_selector).to.equal(old);

    // An on-demand rotation: a standby key first, published and seen, then it takes over.
    const { domains, rotator } = bed.server.daemon.core;
    const record = () => domains.get(bed.server.accountId, 'example.com');
    expect((await rotator.rotate(await record(), true)).decision.kind).to.equal('no_standby');
    bed.publish(await bed.get('example.com'));
    expect((await bed.recheck('example.com')).body.rotation_ready).to.equal(true);
    expect((await rotator.rotate(await record(), true)).decision.kind).to.equal('rotate');
    const current = activeSelector(await bed.get('example.com'));
    expect(current).to.not.equal(old);

    const after = await send('after@example.org');
    expect((await get(`/messages/${before}/activity`)).body.dkim_selector).to.equal(old);
    expect((await get(`/messages/${after}/activity`)).body.dkim_selector).to.equal(current);
    // The signatures the MX received name the same selectors.
    const selectors = (raw: string) =>
      raw
        .split('\r\n\r\n')[0]!
        .replace(/\r\n[ \t]+/g, ' ')
        .split('\r\n')
        .filter((line) => /^dkim-signature:/i.test(line))
        .map((line) => /(?:^|;)\s*s=([^;\s]+)/.exec(line.slice(line.indexOf(':') + 1))?.[1]);
    expect(sink.received.map((m) => selectors(m.raw))).to.deep.equal([[old], [current]]);
  });

  it('gives the schedule and says a scheduled message is cancellable, until it is cancelled', async () => {
    const firstAttempt = new Date(bed.clock.now() + 3_600_000).toISOString();
    const sent = await bed.send({ recipients: [{ email: 'later@example.org' }], schedule: { first_attempt: firstAttempt } });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    const header = sent.body.data[0].id as string;
    const id = header.slice(1, header.indexOf('@'));
    const scheduled = await get(`/messages/${id}/activity`);
    expect(scheduled.status).to.equal(200);
    expect(scheduled.body.schedule).to.deep.equal({ first_attempt: firstAttempt, expires: null });
    expect(scheduled.body.cancellable).to.equal(true);
    expect(scheduled.body.dkim_selector).to.equal(null);
    expect(scheduled.body.trace.filter((t: { kind: string }) => t.kind === 'attempt')).to.deep.equal([]);

    expect((await bed.api('DELETE', `${bed.messages}/${id}/cancel`)).status).to.equal(200);
    const cancelled = await get(`/messages/${id}/activity`);
    expect(cancelled.body.schedule).to.deep.equal({ first_attempt: firstAttempt, expires: null });
    expect(cancelled.body.cancellable).to.equal(false);
  });

  it("sends a test event, lists a webhook's recent deliveries with their status and response time, and says why one is disabled", async () => {
    const hook = await createWebhook('/test', { on_delivered: true });
    const sent = await post(`/webhooks/${hook}/test`);
    expect(sent.status).to.equal(202);
    expect(sent.body.delivery_id).to.be.a('string');
    await receiver.until((r) => r.length === 1);
    const got = receiver.verified('/test')[0]!;
    expect(got.payload).to.include({ type: 'webhook.test', webhook_id: hook });
    expect(got.headers['webhook-id']).to.equal(sent.body.delivery_id);
    let list: { status: number; body: any } = { status: 0, body: null }; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON asserted below
    await eventually(async () => {
      list = await get(`/webhooks/${hook}/deliveries`);
      return list.body?.deliveries?.length === 1;
    });
    expect(list.body.disabled_reason).to.equal(null);
    expect(list.body.deliveries[0]).to.include({ delivery_id: sent.body.delivery_id, event_type: 'webhook.test', status: 'delivered', response_status: 204 });
    expect(list.body.deliveries[0].response_ms).to.be.a('number');

    expect((await bed.api('PUT', `${base}/webhooks/${hook}`, { body: { enabled: false } })).status).to.equal(200);
    expect((await get(`/webhooks/${hook}/deliveries`)).body.disabled_reason).to.match(/^disabled by hand/);
    const refused = await post(`/webhooks/${hook}/test`);
    expect(refused.status).to.equal(409);
    expect(refused.body.message).to.match(/disabled/);

    // Another account's webhook id is not found; a key that may only read webhooks may not send a test.
    const other = await otherAccount(bed);
    const foreign = `/ui/api/dashboard/accounts/${other.accountId}/webhooks/${hook}`;
    expect((await ask(mount.url, other.key, 'GET', `${foreign}/deliveries`)).status).to.equal(404);
    expect((await ask(mount.url, other.key, 'POST', `${foreign}/test`, {})).status).to.equal(404);
    expect((await post(`/webhooks/${hook}/test`, await bed.key(['webhooks:read:all']))).status).to.equal(403);
    expect((await get('/webhooks/not-a-uuid/deliveries')).status).to.equal(400);
  });

  it("shows a domain's DKIM keys, published or not, and its rotation; a route's deliveries; another account's are not found", async () => {
    const dkim = await get('/domains/example.com/dkim');
    expect(dkim.status).to.equal(200);
    const active = dkim.body.keys.filter((k: { state: string }) => k.state === 'active');
    expect(active.map((k: { selector: string }) => k.selector)).to.include(activeSelector(bed.domain));
    expect(active.every((k: { published: boolean }) => k.published)).to.equal(true);
    expect(active[0].record.host).to.equal(`${active[0].selector}._domainkey.example.com`);
    expect(dkim.body.rotation).to.have.keys(['interval_days', 'enabled', 'last_rotated_at', 'ready']);
    const other = await otherAccount(bed);
    expect((await ask(mount.url, other.key, 'GET', `/ui/api/dashboard/accounts/${other.accountId}/domains/example.com/dkim`)).status).to.equal(404);
    expect((await get(`/domains/${'a'.repeat(300)}.com/dkim`)).status).to.equal(400);

    const unknown = '01900000-0000-7000-8000-000000000000';
    expect((await get(`/routes/${unknown}/deliveries`)).status).to.equal(404);
  });
});

describe("dashboard activity routes: a route's deliveries", function () {
  this.timeout(60_000);
  let bed: MessageBed;
  let receiver: WebhookReceiver;
  let mount: { url: string; close: () => Promise<void> };

  beforeEach(async () => {
    receiver = await WebhookReceiver.start();
    bed = await startMessageBed({ ...POLLING, smtp: { inbound: { enabled: true, port: 0 } }, webhooks: { allow_networks: ['127.0.0.0/8'] } });
    mount = await mountRoutes(bed.server.daemon.core, routesOf(bed));
  });
  afterEach(async () => {
    await mount?.close();
    await bed?.stop();
    await receiver?.stop();
  });

  it('lists the POSTs of inbound mail to the route with their status and response time; another account gets 404', async () => {
    const created = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/routes`, {
      body: { name: 'support', url: receiver.url('/r'), recipient: 'support@example.com' },
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    receiver.secrets.set('/r', created.body.secret);
    const route = created.body.id as string;
    const port = bed.server.daemon.parts.inbound.port!;
    await createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true }).sendMail({
      from: 'c@example.net',
      to: 'support@example.com',
      subject: 'Help',
      text: 'I need help.',
    });
    await receiver.until((r) => r.length === 1);
    const path = `/ui/api/dashboard/accounts/${bed.server.accountId}/routes/${route}/deliveries`;
    let list: { status: number; body: any } = { status: 0, body: null }; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON asserted below
    await eventually(async () => {
      list = await ask(mount.url, bed.server.adminKey, 'GET', path);
      return list.body?.deliveries?.length === 1;
    });
    expect(list.body.deliveries[0]).to.include({ route_id: route, status: 'delivered', response_status: 204, attempts: 0 });
    expect(list.body.deliveries[0].message_id).to.be.a('string');
    expect(list.body.deliveries[0].response_ms).to.be.a('number');
    const other = await otherAccount(bed);
    expect((await ask(mount.url, other.key, 'GET', `/ui/api/dashboard/accounts/${other.accountId}/routes/${route}/deliveries`)).status).to.equal(404);
  });
});
