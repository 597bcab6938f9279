import { expect } from 'chai';
import type { Worker } from 'node:worker_threads';
import { HttpClientThread } from '../../../src/delivery/http-client-thread.ts';
import type { SignedPost } from '../../../src/delivery/http.ts';
import { newWebhookSecret } from '../../../src/delivery/signing.ts';
import { WebhookReceiver } from '../../helpers/webhook-receiver.ts';

describe('the HTTP client thread', function () {
  this.timeout(30_000);
  let receiver: WebhookReceiver;
  let client: HttpClientThread;
  const errors: string[] = [];
  const secret = newWebhookSecret();
  const post = (path: string, n: number): SignedPost => ({
    url: receiver.url(path),
    body: JSON.stringify({ type: 'message.delivered', timestamp: 1_700_000_000, webhook_id: 'w', data: { n } }),
    id: `delivery-${n}`,
    timestampSeconds: Math.floor(Date.now() / 1000),
    secret,
  });
  const worker = () => (client as unknown as { worker: Worker | null }).worker;

  beforeEach(async () => {
    receiver = await WebhookReceiver.start();
    for (const path of ['/ok', '/hang']) receiver.secrets.set(path, secret);
    receiver.answer = (d) => (d.path === '/hang' ? 'hang' : d.payload ? 204 : 400);
    errors.length = 0;
    client = new HttpClientThread(
      { dns: { servers: [], timeoutMs: 1000, tries: 1 }, allowNetworks: ['127.0.0.0/8'], maxSocketsPerOrigin: 4 },
      (_err, message) => errors.push(message),
    );
  });

  afterEach(async () => {
    await client.close();
    await receiver.stop();
  });

  it('starts with the first post, and signs and sends in the thread, verifiable by the standard library', async () => {
    expect(worker()).to.equal(null);
    const outcomes = await Promise.all([1, 2, 3].map((n) => client.postSigned(post('/ok', n))));
    expect(outcomes.map((o) => [o.ok, o.status])).to.deep.equal([
      [true, 204],
      [true, 204],
      [true, 204],
    ]);
    expect(
      receiver
        .verified('/ok')
        .map((d) => d.headers['webhook-id'])
        .sort(),
    ).to.deep.equal(['delivery-1', 'delivery-2', 'delivery-3']);
    expect(worker()).to.not.equal(null);
  });

  it('refuses a private address in the thread as in the daemon (allow_networks is handed over)', async () => {
    const refused = new HttpClientThread({ dns: { servers: [], timeoutMs: 1000, tries: 1 }, allowNetworks: [], maxSocketsPerOrigin: 4 }, () => {});
    try {
      const outcome = await refused.postSigned(post('/ok', 1));
      expect(outcome.ok).to.equal(false);
      expect(outcome.error).to.match(/refused to connect to 127\.0\.0\.1: .*loopback/);
      expect(receiver.received).to.have.length(0);
    } finally {
      await refused.close();
    }
  });

  it('a post in flight when the thread ends is a failed attempt; the next post starts a new thread', async () => {
    const hanging = client.postSigned(post('/hang', 1));
    await receiver.until((r) => r.length === 1);
    const first = worker()!;
    await first.terminate();
    const outcome = await hanging;
    expect(outcome).to.include({ ok: false, status: null, unreachable: false });
    expect(outcome.error).to.match(/the HTTP client thread ended/);
    expect(errors).to.have.length(1);
    const again = await client.postSigned(post('/ok', 2));
    expect(again).to.include({ ok: true, status: 204 });
    expect(worker()).to.not.equal(first);
  });

  it('close cuts the requests in flight, which come back failed, and later posts fail at once', async () => {
    const hanging = client.postSigned(post('/hang', 1));
    await receiver.until((r) => r.length === 1);
    await client.close();
    const outcome = await hanging;
    expect(outcome.ok).to.equal(false);
    expect(outcome.status).to.equal(null);
    expect(worker()).to.equal(null);
    expect(await client.postSigned(post('/ok', 2))).to.include({ ok: false, error: 'the HTTP client is closed' });
    expect(errors).to.deep.equal([]);
  });
});
