import { expect } from 'chai';
import { createTransport } from 'nodemailer';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { WebhookReceiver, type Delivery } from '../../helpers/webhook-receiver.ts';

/**
 * Webhook deliveries and route POSTs whose outcome cannot be stored after the endpoint's 2xx
 * (a store fault injected in the batch writer, sticky as LevelDB's): each is posted once, its
 * outcome written once the store takes writes again, and no new attempt starts meanwhile.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const diskFull = () => new Error('IO error: /data/000123.log: No space left on device');
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('HTTP jobs while the store refuses writes (injected faults)', function () {
  this.timeout(40_000);
  let bed: MessageBed;
  let receiver: WebhookReceiver;

  beforeEach(async () => {
    receiver = await WebhookReceiver.start();
    bed = await startMessageBed({
      ...POLLING,
      storage: { check_interval_ms: 100, min_free_bytes: 0, min_free_percent: 0 },
      smtp: { inbound: { enabled: true, port: 0 } },
      webhooks: { allow_networks: ['127.0.0.0/8'] },
    });
  });
  afterEach(async () => {
    bed.server.daemon.core.store.injectFault(null);
    await bed.stop();
    await receiver.stop();
  });

  const untilWritable = async () => {
    const deadline = Date.now() + 15_000;
    while (!bed.server.daemon.storage.ok) {
      if (Date.now() > deadline) throw new Error(`storage still refuses writes: ${bed.server.daemon.storage.reason}`);
      await wait(50);
    }
  };
  /** How many times each request id (webhook-id) arrived. */
  const copies = (received: Delivery[]) => {
    const counts = new Map<string, number>();
    for (const d of received) counts.set(String(d.headers['webhook-id']), (counts.get(String(d.headers['webhook-id'])) ?? 0) + 1);
    return counts;
  };

  it('posts each webhook delivery once when its outcome cannot be stored after the 2xx, and records it once writes land', async () => {
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/webhooks`, {
      body: { name: 'w', url: receiver.url('/w'), scope: 'global', on_reception: true },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    receiver.secrets.set('/w', res.body.secret);
    const store = bed.server.daemon.core.store;
    let failing = false;
    store.injectFault(() => (failing ? diskFull() : null), { sticky: true });
    // The disk fills as the first delivery is answered.
    receiver.answer = (d) => {
      failing = true;
      return d.payload ? 204 : 400;
    };
    expect(
      (await bed.send({ sandbox: true, recipients: [{ email: 'a@example.org' }, { email: 'b@example.org' }, { email: 'c@example.org' }] })).status,
    ).to.equal(202);
    await receiver.until((r) => r.length >= 1);
    await wait(2000);
    const during = receiver.received.length;
    expect(
      [...copies(receiver.received).values()].every((n) => n === 1),
      JSON.stringify([...copies(receiver.received)]),
    ).to.equal(true);
    receiver.answer = (d) => (d.payload ? 204 : 400);
    failing = false;
    await untilWritable();
    // Every reception event reaches the receiver (the ones not posted before, now), each once.
    await receiver.until((r) => copies(r).size >= 3, 15_000);
    await wait(1000);
    const counts = copies(receiver.received);
    expect([...counts.values()], `${during} during the fault`).to.deep.equal([1, 1, 1]);
    const [listed] = (await bed.api('GET', `/v2/accounts/${bed.server.accountId}/webhooks`)).body.data;
    expect(listed.success_count).to.equal(3);
  });

  it("posts an inbound message to its route once when the POST's outcome cannot be stored after the 2xx", async () => {
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/routes`, {
      body: { name: 'r', url: receiver.url('/r'), recipient: 'support@example.com' },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    receiver.secrets.set('/r', res.body.secret);
    const store = bed.server.daemon.core.store;
    let failing = false;
    store.injectFault(() => (failing ? diskFull() : null), { sticky: true });
    receiver.answer = (d) => {
      failing = true;
      return d.payload ? 204 : 400;
    };
    await createTransport({ host: '127.0.0.1', port: bed.server.daemon.parts.inbound.port!, secure: false, ignoreTLS: true }).sendMail({
      from: 'c@example.net',
      to: 'support@example.com',
      subject: 'Help',
      text: 'I need help.',
    });
    await receiver.until((r) => r.length >= 1);
    await wait(2000);
    expect(receiver.received).to.have.length(1);
    failing = false;
    await untilWritable();
    const deadline = Date.now() + 15_000;
    for (;;) {
      const [route] = (await bed.api('GET', `/v2/accounts/${bed.server.accountId}/routes`)).body.data;
      if (route.success_count === 1) break;
      if (Date.now() > deadline) throw new Error(`route outcome not recorded: ${JSON.stringify(route)}`);
      await wait(100);
    }
    await wait(500);
    expect(receiver.received).to.have.length(1);
  });
});
