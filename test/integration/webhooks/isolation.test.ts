import { expect } from 'chai';
import type { TestServer } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/** Per-origin limits: an endpoint that hangs holds its own origin's slots and nobody else's. */
describe('webhook origins are isolated', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let slow: WebhookReceiver;
  let fast: WebhookReceiver;

  beforeEach(async () => {
    [slow, fast] = await Promise.all([WebhookReceiver.start(), WebhookReceiver.start()]);
    bed = await startMessageBed({ webhooks: { allow_networks: ['127.0.0.0/8'] } });
  });

  afterEach(async () => {
    await bed.stop();
    await Promise.all([slow.stop(), fast.stop()]);
  });

  async function hook(receiver: WebhookReceiver, path: string): Promise<void> {
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/webhooks`, {
      body: { name: path, url: receiver.url(path), scope: 'global', on_reception: true },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    receiver.secrets.set(path, res.body.secret);
  }

  it('a hanging endpoint holds at most webhooks.per_origin requests; another origin gets every event at once', async () => {
    await hook(slow, '/hang');
    await hook(fast, '/ok');
    // The slow receiver reads each request and never answers (until the 10 s timeout).
    slow.answer = () => 'hang';
    const recipients = Array.from({ length: 40 }, (_, i) => ({ email: `r${i}@example.org` }));
    const started = Date.now();
    expect((await bed.send({ sandbox: true, recipients })).status).to.equal(202);
    await fast.until((r) => r.length === 40, 5000);
    expect(Date.now() - started).to.be.below(5000);
    // The hanging origin has exactly its 4 slots in use, and the rest of its deliveries wait.
    await new Promise((r) => setTimeout(r, 200));
    expect(slow.received).to.have.length(4);
    const origin = bed.server.daemon.parts.jobs.engine.destinations().find((d) => d.destination === new URL(slow.url('/')).origin);
    expect(origin).to.include({ dispatcher: 'http', running: 4, concurrency: 4 });
    expect(origin!.ready).to.equal(36);
  });

  it('parks the deliveries of an origin that answers nothing, and after a restart probes it and sends them all, once each', async () => {
    await hook(fast, '/down');
    const port = fast.port;
    const secrets = new Map(fast.secrets);
    await fast.stop();
    const recipients = Array.from({ length: 50 }, (_, i) => ({ email: `r${i}@example.org` }));
    expect((await bed.send({ sandbox: true, recipients })).status).to.equal(202);
    const store = bed.server.daemon.core.store;
    const deadline = Date.now() + 10_000;
    // The first attempts find it down: the rest are parked in the store, not held in memory.
    while ((await store.families.jobsParked.keys().all()).length < 40) {
      if (Date.now() > deadline) throw new Error('the deliveries were never parked');
      await new Promise((r) => setTimeout(r, 50));
    }
    const origin = new URL(fast.url('/')).origin;
    const down = bed.server.daemon.parts.jobs.engine.destinations().find((d) => d.destination === origin);
    expect(down?.pausedUntil).to.be.a('number');
    expect(down?.ready).to.equal(0);
    // Finding it down cost one round of attempts (at most its 4 connections dialled), not one per
    // pending delivery: 100 in a row would disable the webhook, and a backlog must not reach that.
    const [listed] = (await bed.api('GET', `/v2/accounts/${bed.server.accountId}/webhooks`)).body.data;
    expect(listed.enabled).to.equal(true);
    expect(listed.error_count).to.be.within(1, 4);

    let restarted: TestServer | null = null;
    try {
      restarted = await bed.server.restart();
      fast = await WebhookReceiver.start(port);
      for (const [path, secret] of secrets) fast.secrets.set(path, secret);
      // The restarted daemon probes the origin with one parked job; its answer brings the rest.
      bed.clock.advance(10 * 60_000);
      await restarted.daemon.parts.jobs.engine.wake();
      await fast.until((r) => r.length >= 50);
      await new Promise((r) => setTimeout(r, 300));
      expect(
        fast
          .verified()
          .map((d) => d.payload!.data.recipient)
          .sort(),
      ).to.deep.equal(recipients.map((r) => r.email).sort());
      expect(await restarted.daemon.core.store.families.jobsParked.keys().all()).to.deep.equal([]);
    } finally {
      await restarted?.daemon.stop();
    }
  });
});
