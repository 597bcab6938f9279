import { expect } from 'chai';
import type { JobRecord } from '../../../src/store/records.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';
import { assertWebhookPayload } from '../../helpers/webhook-contract.ts';
import { WebhookReceiver, type Delivery } from '../../helpers/webhook-receiver.ts';

/**
 * Webhooks delivered by the running daemon: events produced end to end (API send → MX sink →
 * outcomes, suppressions, DNS checks) fanned out to a real receiver on loopback that verifies
 * every request with the `standardwebhooks` package, and the payloads checked against
 * webhooks.yaml. Retries run on the manual clock.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const FLAGS = [
  'on_reception',
  'on_delivered',
  'on_transient_error',
  'on_failed',
  'on_bounced',
  'on_suppressed',
  'on_opened',
  'on_clicked',
  'on_suppression_created',
  'on_dns_error',
];
const ALL_FLAGS = Object.fromEntries(FLAGS.map((f) => [f, true]));

/** Every webhook delivery stored: pending (in their due-time entries or under their ids), held, parked or failed. */
async function storedJobs(bed: MessageBed): Promise<JobRecord[]> {
  const jobs: JobRecord[] = [];
  for await (const job of bed.server.daemon.core.jobs.list('webhook')) jobs.push(job);
  return jobs;
}

describe('webhook deliveries through the daemon', function () {
  this.timeout(60_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let receiver: WebhookReceiver;

  beforeEach(async () => {
    sink = await startSink();
    receiver = await WebhookReceiver.start();
    bed = await startMessageBed({
      ...POLLING,
      delivery: { enabled: true, mx_port: sink.port, retry: { first_delay_seconds: 300, max_age_hours: 0.05 } },
      webhooks: { allow_networks: ['127.0.0.0/8'] },
    });
    bed.dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    bed.dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
  });

  afterEach(async () => {
    await bed?.stop();
    await sink?.close();
    await receiver?.stop();
  });

  const webhooksPath = () => `/v2/accounts/${bed.server.accountId}/webhooks`;

  async function createWebhook(path: string, body: Record<string, unknown> = {}): Promise<{ id: string; secret: string }> {
    const res = await bed.api('POST', webhooksPath(), { body: { name: path, url: receiver.url(path), scope: 'global', ...ALL_FLAGS, ...body } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    receiver.secrets.set(path, res.body.secret);
    return { id: res.body.id, secret: res.body.secret };
  }

  async function getWebhook(id: string) {
    const res = await bed.api('GET', `${webhooksPath()}/${id}`);
    expect(res.status).to.equal(200);
    return res.body;
  }

  /** Moves the manual clock and lets the engine take what became due. */
  async function advance(ms: number): Promise<void> {
    bed.clock.advance(ms);
    await bed.server.daemon.parts.jobs.engine.wake();
  }

  async function settle(): Promise<void> {
    await bed.server.daemon.parts.webhooks.fanout.drained();
    await new Promise((r) => setTimeout(r, 150));
  }

  const types = (list: Delivery[]) => list.map((d) => d.payload?.type as string);

  it("delivers every event type, signed, in the contract's shape, one job per event and webhook", async () => {
    const hook = await createWebhook('/all');
    sink.rcpt = (address, attempt) => {
      if (address.startsWith('bounce@')) return { code: 550, text: '5.1.1 No such user' };
      if (address.startsWith('later@') && attempt === 1) return { code: 451, text: '4.7.1 Greylisted, try again later' };
      if (address.startsWith('never@')) return { code: 451, text: '4.7.1 Greylisted, try again later' };
      return null;
    };
    for (const to of ['ok@example.org', 'later@example.org', 'bounce@example.org', 'never@example.org']) {
      expect((await bed.send({ recipients: [{ email: to }] })).status).to.equal(202);
    }
    await receiver.until(
      (r) =>
        types(r).filter((t) => t === 'message.transient_error').length === 2 &&
        types(r).includes('suppression.created') &&
        types(r).includes('message.delivered'),
    );
    // A suppressed recipient: not sent, message.suppressed.
    expect((await bed.send({ recipients: [{ email: 'bounce@example.org' }] })).status).to.equal(202);
    await receiver.until((r) => types(r).includes('message.suppressed'));
    // The greylisted retry delivers; the message that is always greylisted runs out of time (max_age 3 min).
    await advance(400_000);
    await receiver.until((r) => types(r).filter((t) => t === 'message.delivered').length === 2 && types(r).includes('message.failed'));
    // domain.dns_error through the loopback DNS server: the DMARC record breaks.
    bed.dns.zone.set('_dmarc.example.com', 'TXT', ['v=spf1 -all']);
    expect((await bed.recheck('example.com')).body.dns_valid).to.equal(false);
    await receiver.until((r) => types(r).includes('domain.dns_error'));
    await settle();

    const got = receiver.received;
    expect(
      got.filter((d) => d.payload === null),
      'every request verifies',
    ).to.deep.equal([]);
    expect(new Set(types(got))).to.deep.equal(
      new Set([
        'message.reception',
        'message.delivered',
        'message.transient_error',
        'message.bounced',
        'message.failed',
        'message.suppressed',
        'suppression.created',
        'domain.dns_error',
      ]),
    );
    expect(types(got).filter((t) => t === 'message.reception')).to.have.length(5);
    // One delivery per event: the webhook-id is unique (none of these was retried).
    expect(new Set(got.map((d) => d.headers['webhook-id'])).size).to.equal(got.length);
    for (const d of got) {
      assertWebhookPayload(d.payload!);
      expect(Object.keys(d.payload!)).to.deep.equal(['type', 'timestamp', 'webhook_id', 'data']);
      expect(d.payload!.webhook_id).to.equal(hook.id);
      expect(d.payload!.timestamp).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$/);
      expect(d.headers['content-type']).to.equal('application/json');
      expect(d.headers['webhook-signature']).to.match(/^v1,[A-Za-z0-9+/]+=*$/);
    }
    const bounced = got.find((d) => d.payload!.type === 'message.bounced')!.payload!;
    expect(bounced.data).to.include({ event: 'on_bounced', recipient: 'bounce@example.org' });
    expect(bounced.data.delivery_attempt).to.include({ smtp_code: 550, classification: 'InvalidRecipient' });
    const dns = got.find((d) => d.payload!.type === 'domain.dns_error')!.payload!;
    expect(dns.data).to.include({ domain: 'example.com', account_id: bed.server.accountId, dmarc_valid: false });

    const counted = await getWebhook(hook.id);
    expect(counted).to.include({ success_count: got.length, error_count: 0, errors_since_last_success: 0 });
    expect(counted.last_request_at).to.be.a('string');
  });

  it('a tampered body or timestamp does not verify', async () => {
    await createWebhook('/check', { on_reception: true });
    await bed.send();
    await receiver.until((r) => r.length === 1);
    const [d] = receiver.received;
    const { Webhook } = await import('standardwebhooks');
    const verifier = new Webhook(receiver.secrets.get('/check')!, { format: 'raw' });
    const headers = d!.headers as Record<string, string>;
    expect(() => verifier.verify(d!.body, headers)).not.to.throw();
    expect(() => verifier.verify(d!.body.replace('message.reception', 'message.delivered'), headers)).to.throw();
    expect(() => verifier.verify(d!.body, { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) + 1) })).to.throw();
  });

  it("a domain-scoped webhook receives only its domains' events; disabled flags and webhooks get none", async () => {
    const second = await bed.create('second.test');
    bed.publish(second);
    expect((await bed.recheck('second.test')).body.dns_valid).to.equal(true);
    const receptionOnly = { ...Object.fromEntries(FLAGS.map((f) => [f, false])), on_reception: true };
    await createWebhook('/scoped', { scope: 'scoped', domains: ['second.test'], ...receptionOnly });
    await createWebhook('/global', receptionOnly);
    await createWebhook('/off', { enabled: false });
    await createWebhook('/delivered-only', { ...Object.fromEntries(FLAGS.map((f) => [f, false])), on_delivered: true });
    const sandbox = { sandbox: true };
    expect((await bed.send({ ...sandbox })).status).to.equal(202);
    expect((await bed.send({ ...sandbox, from: { email: 'app@second.test' } })).status).to.equal(202);
    await receiver.until((r) => r.filter((d) => d.path === '/global').length === 2 && r.some((d) => d.path === '/scoped'));
    await settle();
    const scoped = receiver.verified('/scoped');
    expect(scoped.map((d) => d.payload!.data.from)).to.deep.equal(['app@second.test']);
    expect(receiver.verified('/off')).to.deep.equal([]);
    // Sandbox mail is simulated as delivered: on_delivered sees both, and only that type.
    await receiver.until((r) => r.filter((d) => d.path === '/delivered-only').length === 2);
    expect(new Set(types(receiver.verified('/delivered-only')))).to.deep.equal(new Set(['message.delivered']));
  });

  it('retries a failing endpoint after n⁴ s ±10 %, 6 attempts in all with the same webhook-id, then fails and keeps the delivery', async () => {
    const hook = await createWebhook('/failing', { ...Object.fromEntries(FLAGS.map((f) => [f, false])), on_reception: true });
    receiver.answer = () => 500;
    await bed.send({ sandbox: true });
    await receiver.until((r) => r.length === 1);
    await settle();
    for (let n = 1; n <= 5; n++) {
      const delay = n ** 4 * 1000;
      await advance(delay * 0.89);
      await settle();
      expect(receiver.received, `no attempt before ${n}⁴ s - 10 %`).to.have.length(n);
      await advance(delay * 0.22);
      await receiver.until((r) => r.length === n + 1);
      // The outcome is written after the answer: the next delay counts from then.
      await settle();
    }
    await advance(86_400_000);
    await settle();
    expect(receiver.received).to.have.length(6);
    expect(new Set(receiver.received.map((d) => d.headers['webhook-id'])).size).to.equal(1);
    expect(receiver.received.every((d) => d.payload !== null)).to.equal(true);
    const counted = await getWebhook(hook.id);
    expect(counted).to.include({ success_count: 0, error_count: 6, errors_since_last_success: 6, enabled: true });
    const status = await bed.server.daemon.core.jobs.get(receiver.received[0]!.headers['webhook-id'] as string);
    expect(status).to.include({ state: 'failed', attempts: 6 });
    expect(status!.lastAttempt).to.include({ status: 500, error: 'HTTP 500' });
  });

  it('a receiver down for an hour gets every event once it is back, once per webhook', async () => {
    const only = { ...Object.fromEntries(FLAGS.map((f) => [f, false])), on_reception: true };
    await createWebhook('/a', only);
    await createWebhook('/b', only);
    const port = receiver.port;
    await receiver.stop();
    for (let i = 0; i < 3; i++) await bed.send({ sandbox: true, recipients: [{ email: `r${i}@example.org` }] });
    await settle();
    for (let minute = 0; minute < 60; minute += 5) {
      await advance(5 * 60_000);
      await settle();
    }
    // Down all along (connections refused): the origin is paused and probed, the deliveries wait.
    const down = bed.server.daemon.parts.jobs.engine.destinations().find((d) => d.destination === `http://127.0.0.1:${port}`);
    expect(down?.pausedUntil).to.be.a('number');
    const secrets = new Map(receiver.secrets);
    receiver = await WebhookReceiver.start(port);
    for (const [path, secret] of secrets) receiver.secrets.set(path, secret);
    await advance(10 * 60_000);
    await receiver.until((r) => r.length >= 6);
    await settle();
    expect(receiver.received).to.have.length(6);
    for (const path of ['/a', '/b']) {
      expect(
        receiver.received
          .filter((d) => d.path === path)
          .map((d) => d.payload?.data.recipient)
          .sort(),
      ).to.deep.equal(['r0@example.org', 'r1@example.org', 'r2@example.org']);
    }
  });

  it('disables a webhook after 100 failed attempts in a row, holds its deliveries, and sends them once when it is enabled again', async () => {
    const hook = await createWebhook('/flaky', { ...Object.fromEntries(FLAGS.map((f) => [f, false])), on_reception: true });
    // 500 at once to the first 99 requests; later ones wait until the test lets them go.
    const waiting: Array<() => void> = [];
    let answered = 0;
    receiver.answer = () => (++answered <= 99 ? 500 : new Promise<number>((resolve) => waiting.push(() => resolve(500))));
    const letGo = (n: number) => waiting.splice(0, n).forEach((go) => go());
    const until = async (probe: () => Promise<boolean>, what: string) => {
      const deadline = Date.now() + 5000;
      while (!(await probe())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    // 150 deliveries: more than the 100 failures that disable it (at most 100 recipients a request).
    for (const [first, count] of [
      [0, 100],
      [100, 50],
    ] as const) {
      const recipients = Array.from({ length: count }, (_, i) => ({ email: `r${first + i}@example.org` }));
      expect((await bed.send({ sandbox: true, recipients })).status).to.equal(202);
    }
    // 99 failures, and the origin's 4 slots held by unanswered requests: still enabled.
    await receiver.until((r) => r.length >= 99 + 4);
    await settle();
    expect(receiver.received).to.have.length(103);
    expect(await getWebhook(hook.id)).to.include({ enabled: true, error_count: 99, errors_since_last_success: 99 });
    // The 100th failure disables it. The slot it frees may start one more request before the
    // disable lands; that one waits too.
    letGo(1);
    await until(async () => (await getWebhook(hook.id)).enabled === false, 'the webhook disabled');
    await settle();
    expect(receiver.received.length).to.be.within(103, 104);
    letGo(waiting.length);
    await settle();
    // Those count too; nothing else was sent.
    const failed = receiver.received.length;
    expect(failed).to.be.within(103, 104);
    expect(receiver.received.every((d) => d.payload !== null)).to.equal(true);
    expect(await getWebhook(hook.id)).to.include({ enabled: false, error_count: failed, errors_since_last_success: failed, success_count: 0 });

    const jobsOf = async () => (await storedJobs(bed)).filter((j) => j.targetId === hook.id);
    expect(await jobsOf()).to.have.length(150);
    // Later events get no delivery.
    expect((await bed.send({ sandbox: true, recipients: [{ email: 'late@example.org' }] })).status).to.equal(202);
    await settle();
    expect(await jobsOf()).to.have.length(150);
    // The retries come due (1 s ±10 %) and are held, not sent, like every delivery not tried yet.
    await advance(2000);
    await settle();
    expect(receiver.received).to.have.length(failed);
    const held = await jobsOf();
    expect(held.map((j) => j.state)).to.deep.equal(Array(150).fill('held'));
    expect(held.filter((j) => j.attempts === 1)).to.have.length(failed);
    expect(held.filter((j) => j.attempts === 0)).to.have.length(150 - failed);

    // Enabled again: the run of failures starts over, and the held deliveries go. The first
    // answer is one more 500; its retry (after 16 s if it had failed before, else 1 s) and all
    // the others succeed.
    let resentCount = 0;
    receiver.answer = () => (++resentCount === 1 ? 500 : 204);
    const enabled = await bed.api('PUT', `${webhooksPath()}/${hook.id}`, { body: { enabled: true } });
    expect(enabled.status, JSON.stringify(enabled.body)).to.equal(200);
    expect(enabled.body).to.include({ enabled: true, errors_since_last_success: 0 });
    await receiver.until((r) => r.length >= failed + 150);
    await settle();
    await advance(20_000);
    await receiver.until((r) => r.length >= failed + 151);
    await settle();
    const resent = receiver.received.slice(failed);
    expect(resent).to.have.length(151);
    const ids = resent.map((d) => d.headers['webhook-id'] as string);
    expect(new Set(ids)).to.deep.equal(new Set(held.map((j) => j.id)));
    // Each held delivery once, and the one that failed once more.
    expect(ids.filter((id) => id === ids[0])).to.have.length(2);
    expect(resent.every((d) => d.payload !== null && d.payload.data.recipient !== 'late@example.org')).to.equal(true);
    expect(await getWebhook(hook.id)).to.include({ enabled: true, success_count: 150, error_count: failed + 1, errors_since_last_success: 0 });
    expect(await jobsOf()).to.deep.equal([]);
  });

  it('a webhook disabled through the API sends none of the deliveries already handed to its HTTP client, and sends them all once enabled', async () => {
    const hook = await createWebhook('/slow', { ...Object.fromEntries(FLAGS.map((f) => [f, false])), on_reception: true });
    // The first requests are held unanswered: the origin's 4 connections are busy, and the
    // deliveries handed over after them wait in the client for a connection.
    const waiting: Array<() => void> = [];
    receiver.answer = () => new Promise<number>((resolve) => waiting.push(() => resolve(204)));
    const recipients = Array.from({ length: 30 }, (_, i) => ({ email: `s${i}@example.org` }));
    expect((await bed.send({ sandbox: true, recipients })).status).to.equal(202);
    await receiver.until((r) => r.length >= 4);
    await settle();
    await new Promise((r) => setTimeout(r, 100));
    expect(receiver.received).to.have.length(4);
    const disabled = await bed.api('PUT', `${webhooksPath()}/${hook.id}`, { body: { enabled: false } });
    expect(disabled.status, JSON.stringify(disabled.body)).to.equal(200);
    // The 4 under way are answered; nothing that waited goes out.
    receiver.answer = () => 204;
    waiting.splice(0).forEach((go) => go());
    await new Promise((r) => setTimeout(r, 300));
    await settle();
    expect(receiver.received).to.have.length(4);
    const jobs = (await storedJobs(bed)).filter((j) => j.targetId === hook.id);
    expect(jobs).to.have.length(26);
    expect(jobs.every((j) => j.state === 'held' || j.state === 'pending')).to.equal(true);
    // Enabled again: each of the others once.
    expect((await bed.api('PUT', `${webhooksPath()}/${hook.id}`, { body: { enabled: true } })).status).to.equal(200);
    await receiver.until((r) => r.length >= 30);
    await settle();
    await new Promise((r) => setTimeout(r, 100));
    const recipientsSent = receiver.received.map((d) => d.payload!.data.recipient as string);
    expect(recipientsSent.sort()).to.deep.equal(recipients.map((r) => r.email).sort());
  });
});
