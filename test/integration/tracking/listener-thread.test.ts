import { expect } from 'chai';
import { createServer, type Server } from 'node:net';
import { ListenError } from '../../../src/bind-phase.ts';
import type { EventRecord } from '../../../src/store/records.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { trackingGet, trackingUrls } from '../../helpers/tracking.ts';

/**
 * The tracking listener as a thread of its own: what the daemon hands it (trusted proxies on a
 * reload), what it hands back (every hit answered, even at a stop), the facts it keeps (a message
 * deleted meanwhile is answered from them, but nothing is written for it), and a start that fails.
 */
describe('tracking listener thread', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let base: string;

  beforeEach(async () => {
    bed = await startMessageBed({ api: { rate_limits: { general: { per_second: 1000, burst: 10_000 } } }, tracking: {} });
    base = bed.server.daemon.parts.tracking.url!;
  });

  afterEach(async () => {
    await bed?.stop();
  });

  async function tracked(): Promise<{ id: string; pixel: string; link: string }> {
    const res = await bed.send({ html_content: '<html><body><a href="https://shop.example.net/x">x</a></body></html>', tracking: { open: true, click: true } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const ref = res.body.data[0].id as string;
    const message = await bed.read(ref);
    // The record's id: the UUID of the Message-ID the API answers with.
    const id = ref.replace(/^<|@.*$/g, '');
    const html = message.content_parsed.parts.find((p: { content_type: string }) => p.content_type.startsWith('text/html')).content as string;
    const { pixel, links } = trackingUrls(html);
    return { id, pixel: pixel!, link: links[0]! };
  }

  async function events(type: string): Promise<EventRecord[]> {
    await bed.server.daemon.parts.tracking.drained();
    return bed.server.daemon.core.eventsRepo.recent(bed.server.accountId, 100, type);
  }

  it('takes api.trusted_proxies from a configuration reload', async () => {
    const { link } = await tracked();
    await trackingGet(base, link, { 'x-forwarded-for': '203.0.113.9' });
    expect((await events('message.clicked'))[0]!.data.ip, "an untrusted peer's header is ignored").to.equal('127.0.0.1');

    bed.server.daemon.reload({ ...bed.server.config, api: { ...bed.server.config.api, trusted_proxies: ['127.0.0.0/8'] } });
    // The thread hears of it in order with the requests that follow; give the message a moment.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await trackingGet(base, link, { 'x-forwarded-for': '203.0.113.9' });
    expect((await events('message.clicked'))[0]!.data.ip).to.equal('203.0.113.9');
    // A trusted peer's unreadable header is refused, as by the API.
    expect((await trackingGet(base, link, { 'x-forwarded-for': 'not-an-address' })).status).to.equal(400);
  });

  it('records every hit it answered when the daemon stops right after', async () => {
    const { id, pixel, link } = await tracked();
    const answers = await Promise.all([
      ...Array.from({ length: 20 }, () => trackingGet(base, link)),
      ...Array.from({ length: 10 }, () => trackingGet(base, pixel)),
    ]);
    expect(answers.map((a) => a.status).filter((s) => s !== 302 && s !== 200)).to.deep.equal([]);
    // No drain: the stop itself hands over and writes what was answered.
    const restarted = await bed.server.restart();
    try {
      const recent = await restarted.daemon.core.eventsRepo.recent(bed.server.accountId, 100);
      expect(recent.filter((e) => e.type === 'message.clicked')).to.have.length(20);
      expect(recent.filter((e) => e.type === 'message.opened')).to.have.length(10);
      const [hits] = await restarted.daemon.core.messagesRepo.hits([id]);
      expect(hits).to.include({ opens: 10, clicks: 20 });
    } finally {
      await restarted.stop();
    }
  });

  it('answers a message deleted meanwhile from what it keeps, but writes nothing for it', async () => {
    const { id, link } = await tracked();
    expect((await trackingGet(base, link)).status).to.equal(302);
    expect(await events('message.clicked')).to.have.length(1);
    const { core } = bed.server.daemon;
    const stored = (await core.messagesRepo.get(id))!;
    await core.store.commit(core.messagesRepo.delete(stored));
    expect((await core.messagesRepo.hits([id]))[0], 'the hits record goes with the message').to.equal(undefined);

    expect((await trackingGet(base, link)).status).to.equal(302);
    expect(await events('message.clicked')).to.have.length(1);
    expect((await core.messagesRepo.hits([id]))[0], 'and is not written again').to.equal(undefined);
  });

  it('counts as ready while its thread runs (/readyz)', async () => {
    const res = await fetch(`${bed.server.daemon.parts.metrics.url}/readyz`);
    expect(res.status, await res.text()).to.equal(200);
  });
});

describe('tracking listener thread start', function () {
  this.timeout(30_000);
  let taken: Server;
  let server: TestServer | null = null;

  before(async () => {
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    await server?.stop();
    await new Promise<void>((resolve) => taken.close(() => resolve()));
  });

  it("fails the daemon's start, naming the address, when the port is taken", async () => {
    const port = (taken.address() as { port: number }).port;
    let error: (Error & { code?: string }) | null = null;
    try {
      server = await startServer({ config: { tracking: { host: '127.0.0.1', port } } });
    } catch (err) {
      error = err as Error & { code?: string };
    }
    // Bound in the daemon's bind phase, before anything opened: the one line `postilion start` prints.
    expect(error).to.be.instanceOf(ListenError);
    expect(error?.message).to.equal(`cannot listen on 127.0.0.1:${port} (tracking): address already in use`);
  });
});
