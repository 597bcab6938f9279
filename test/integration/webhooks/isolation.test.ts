import { expect } from 'chai';
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
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/webhooks`, { body: { name: path, url: receiver.url(path), scope: 'global', on_reception: true } });
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
    const origin = (await bed.server.daemon.jobEngine.destinations()).find((d) => d.destination === new URL(slow.url('/')).origin);
    expect(origin).to.include({ dispatcher: 'http', running: 4, concurrency: 4 });
    expect(origin!.ready).to.equal(36);
  });
});
