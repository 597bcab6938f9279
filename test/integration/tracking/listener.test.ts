import { expect } from 'chai';
import type { EventRecord, MessageRecord } from '../../../src/store/records.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { trackingGet, trackingUrls } from '../../helpers/tracking.ts';

/**
 * Open and click tracking through the daemon: mail sent with tracking through the API, its HTML
 * read back, and the tracking listener driven by a real HTTP client with the Host header of the
 * tracking links. Events and counts are read from the store and the API.
 */
const HTML = [
  '<html><body><p>Hello</p>',
  '<a href="https://shop.example.net/deals?a=1&amp;b=2">deals</a>',
  '<a href="mailto:help@example.com">mail us</a>',
  '<a href="tel:+15551234567">call</a>',
  '<a href="#top">top</a>',
  '<a data-as-no-track href="https://private.example.net/">private</a>',
  '<a class="btn" href="http://plain.example.net/x">plain</a>',
  '</body></html>',
].join('\n');
const AMP = '<!doctype html><html ⚡4email><head><meta charset="utf-8"></head><body><a href="https://amp.example.net/">amp</a></body></html>';
const BROWSER = 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0';

describe('open and click tracking', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let base: string;

  beforeEach(async () => {
    bed = await startMessageBed({
      api: { rate_limits: { general: { per_second: 1000, burst: 10_000 }, statistics: { per_second: 1000, burst: 1000 } } },
      tracking: {},
    });
    base = bed.server.daemon.parts.tracking.url!;
  });

  afterEach(async () => {
    await bed?.stop();
  });

  async function sendTracked(fields: Record<string, unknown> = {}): Promise<string[]> {
    const res = await bed.send({
      html_content: HTML,
      amp_content: AMP,
      text_content: 'See https://shop.example.net/deals',
      tracking: { open: true, click: true },
      ...fields,
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.data.map((d: { id: string }) => d.id);
  }

  /** The HTML part of a stored message, decoded. */
  async function htmlOf(id: string): Promise<string> {
    const message = await bed.read(id);
    return message.content_parsed.parts.find((p: { content_type: string }) => p.content_type.startsWith('text/html')).content as string;
  }

  async function events(type: string): Promise<EventRecord[]> {
    await bed.server.daemon.parts.tracking.drained();
    return bed.server.daemon.core.eventsRepo.recent(bed.server.accountId, 100, type);
  }

  /** The stored record with its opens and clicks added (its hits record), as the API shows it. */
  async function record(id: string): Promise<MessageRecord> {
    await bed.server.daemon.parts.tracking.drained();
    const stored = (await bed.server.daemon.core.messagesRepo.get(id.replace(/^<|@.*$/g, '')))!;
    return (await bed.server.daemon.core.messages.shown([stored]))[0]!;
  }

  it('rewrites only trackable links of the HTML part, adds one pixel, and leaves text and AMP alone', async () => {
    const [id] = await sendTracked();
    const html = await htmlOf(id!);
    const { pixel, links } = trackingUrls(html);
    expect(pixel).to.match(/^https:\/\/track\.example\.com\/o\/[A-Za-z0-9_-]+$/);
    expect(links).to.have.length(2);
    for (const link of links) expect(link).to.match(/^https:\/\/track\.example\.com\/c\/[A-Za-z0-9_-]+$/);
    for (const kept of ['mailto:help@example.com', 'tel:+15551234567', 'href="#top"', 'https://private.example.net/']) expect(html).to.include(kept);
    expect(html).not.to.include('shop.example.net');
    expect(html.indexOf('/o/')).to.be.lessThan(html.indexOf('</body>'));
    const message = await bed.read(id!);
    const text = message.content_parsed.parts.find((p: { content_type: string }) => p.content_type.startsWith('text/plain')).content;
    expect(text).to.include('https://shop.example.net/deals');
    expect(message.content).to.include('https://amp.example.net/');
  });

  it('answers the pixel with an uncached GIF and a click with a 302 to the original link, and records both', async () => {
    const [id] = await sendTracked();
    const { pixel, links } = trackingUrls(await htmlOf(id!));
    const open = await trackingGet(base, pixel!, { 'user-agent': BROWSER });
    expect(open.status).to.equal(200);
    expect(open.headers['content-type']).to.equal('image/gif');
    expect(open.headers['cache-control']).to.include('no-store');
    expect(open.body.subarray(0, 6).toString('latin1')).to.equal('GIF89a');
    const click = await trackingGet(base, links[0]!, { 'user-agent': BROWSER });
    expect(click.status).to.equal(302);
    expect(click.headers.location).to.equal('https://shop.example.net/deals?a=1&b=2');
    const second = await trackingGet(base, links[1]!);
    expect(second.headers.location).to.equal('http://plain.example.net/x');

    const opened = await events('message.opened');
    expect(opened).to.have.length(1);
    expect(opened[0]!.data).to.deep.equal({
      account_id: bed.server.accountId,
      event: 'on_opened',
      from: 'app@example.com',
      recipient: 'rcpt@example.org',
      subject: 'Hello',
      message_id_header: id,
      id: id!.replace(/^<|@.*$/g, ''),
      user_agent: BROWSER,
      ip: '127.0.0.1',
      is_bot: false,
    });
    const clicked = await events('message.clicked');
    expect(clicked.map((e) => e.data.url).sort()).to.deep.equal(['http://plain.example.net/x', 'https://shop.example.net/deals?a=1&b=2']);
    const summary = await bed.read(id!);
    expect(summary).to.include({ open_count: 1, click_count: 2 });
  });

  it('refuses tampered and unknown tokens, unknown hosts, a token of the other kind and other methods with 404 (405)', async () => {
    const [id] = await sendTracked();
    const { pixel, links } = trackingUrls(await htmlOf(id!));
    const token = links[0]!.split('/c/')[1]!;
    const flipped = token.slice(0, 5) + (token[5] === 'A' ? 'B' : 'A') + token.slice(6);
    expect((await trackingGet(base, `https://track.example.com/c/${flipped}`)).status).to.equal(404);
    expect((await trackingGet(base, `https://track.example.com/c/${token}x`)).status).to.equal(404);
    expect((await trackingGet(base, `https://track.example.com/o/${token}`)).status, 'a click token is no open token').to.equal(404);
    expect((await trackingGet(base, pixel!.replace('/o/', '/c/'))).status).to.equal(404);
    expect((await trackingGet(base, links[0]!.replace('track.example.com', 'track.example.org'))).status).to.equal(404);
    expect((await trackingGet(base, links[0]!.replace('track.example.com', 'www.example.com'))).status).to.equal(404);
    expect((await trackingGet(base, links[0]!.replace('track.example.com', 'example.com'))).status).to.equal(404);
    expect((await trackingGet(base, 'https://track.example.com/c/')).status).to.equal(404);
    expect((await trackingGet(base, links[0]!, {}, 'POST')).status).to.equal(405);
    const head = await trackingGet(base, links[0]!, {}, 'HEAD');
    expect(head.status).to.equal(302);
    expect(await events('message.opened')).to.have.length(0);
  });

  it('answers over-long and malformed requests with a 4xx and records nothing', async () => {
    const [id] = await sendTracked();
    const { links } = trackingUrls(await htmlOf(id!));
    const path = new URL(links[0]!).pathname;
    const clicksBefore = (await events('message.clicked')).length;
    // A Host past 300 characters, a token past 64, a path with a query or more segments.
    expect((await trackingGet(base, `https://${'a'.repeat(300)}.track.example.com${path}`)).status).to.equal(404);
    expect((await trackingGet(base, `https://track.example.com/c/${'A'.repeat(65)}`)).status).to.equal(404);
    expect((await trackingGet(base, `https://track.example.com${path}/extra`)).status).to.equal(404);
    expect((await trackingGet(base, `https://track.example.com/x${path}`)).status).to.equal(404);
    // A query string is ignored; the link still redirects.
    expect((await trackingGet(base, `https://track.example.com${path}?utm=1`)).status).to.equal(302);
    expect((await events('message.clicked')).length).to.equal(clicksBefore + 1);
  });

  it("does not answer for another domain's tracking host, even with a valid token", async () => {
    const other = await bed.create('example.net');
    bed.publish(other);
    expect((await bed.recheck('example.net')).body.dns_valid).to.equal(true);
    const [id] = await sendTracked();
    const { links } = trackingUrls(await htmlOf(id!));
    expect((await trackingGet(base, links[0]!.replace('track.example.com', 'track.example.net'))).status).to.equal(404);
  });

  it('flags bots, image proxies and clicks within seconds of delivery as is_bot, and counts an opened message once', async () => {
    const [id] = await sendTracked();
    const { pixel, links } = trackingUrls(await htmlOf(id!));
    await trackingGet(base, pixel!, { 'user-agent': 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)' });
    await trackingGet(base, pixel!, { 'user-agent': 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)' });
    await trackingGet(base, pixel!, { 'user-agent': '' });
    expect((await record(id!)).firstOpenAt ?? null, 'bots do not open a message').to.equal(null);
    await trackingGet(base, pixel!, { 'user-agent': BROWSER });
    await trackingGet(base, pixel!, { 'user-agent': BROWSER });
    const opened = await events('message.opened');
    expect(opened.map((e) => e.data.is_bot).reverse()).to.deep.equal([true, true, true, false, false]);
    const m = await record(id!);
    expect(m.openCount).to.equal(5);
    expect(m.firstOpenAt).to.be.a('string');

    // A link scanner: delivered, then clicked within the scanner window (10 s).
    const stored = await record(id!);
    const deliveredAt = new Date(bed.clock.now()).toISOString();
    await bed.server.daemon.core.store.commit(bed.server.daemon.core.messagesRepo.put({ ...stored, status: 'Delivered', deliveredAt }, stored));
    await trackingGet(base, links[0]!, { 'user-agent': BROWSER });
    // A hit is timed when the daemon takes it from the listener's thread: before the clock moves.
    await bed.server.daemon.parts.tracking.drained();
    bed.clock.advance(11_000);
    await trackingGet(base, links[0]!, { 'user-agent': BROWSER });
    const clicked = await events('message.clicked');
    expect(clicked.map((e) => e.data.is_bot).reverse()).to.deep.equal([true, false]);

    const stats = await bed.api('GET', `/v2/accounts/${bed.server.accountId}/statistics/transactional/deliverability?group_by=month`);
    expect(stats.status, JSON.stringify(stats.body)).to.equal(200);
    const total = stats.body.data.reduce((sum: Record<string, number>, b: Record<string, number>) => {
      for (const k of ['reception_count', 'opened_count', 'clicked_count']) sum[k] = (sum[k] ?? 0) + b[k]!;
      return sum;
    }, {});
    expect(total).to.deep.equal({ reception_count: 1, opened_count: 1, clicked_count: 1 });
  });

  it("attributes each recipient's opens and clicks to its own message; untracked mail keeps one shared body", async () => {
    const ids = await sendTracked({ recipients: [{ email: 'a@example.org' }, { email: 'b@example.org' }] });
    const [a, b] = await Promise.all(ids.map(async (id) => trackingUrls(await htmlOf(id))));
    expect(a!.pixel).not.to.equal(b!.pixel);
    expect(a!.links[0]).not.to.equal(b!.links[0]);
    await trackingGet(base, b!.pixel!);
    await trackingGet(base, b!.links[0]!);
    expect(await record(ids[0]!)).to.include({ openCount: 0, clickCount: 0 });
    expect(await record(ids[1]!)).to.include({ openCount: 1, clickCount: 1 });
    const ra = await record(ids[0]!);
    const rb = await record(ids[1]!);
    expect(ra.bodyId).not.to.equal(rb.bodyId);

    const plain = await bed.send({ recipients: [{ email: 'a@example.org' }, { email: 'b@example.org' }] });
    const [pa, pb] = await Promise.all(plain.body.data.map((d: { id: string }) => record(d.id)));
    expect(pa!.bodyId).to.equal(pb!.bodyId);
    expect(trackingUrls(await htmlOf(plain.body.data[0].id)).pixel).to.equal(null);
  });

  it('takes the account defaults unless the request overrides them, and leaves templated links alone', async () => {
    const account = `/v2/accounts/${bed.server.accountId}`;
    expect((await bed.api('PUT', account, { body: { track_opens: true, track_clicks: false } })).status).to.equal(200);
    const [byAccount] = (await bed.send({ html_content: HTML })).body.data.map((d: { id: string }) => d.id);
    const fromAccount = trackingUrls(await htmlOf(byAccount));
    expect(fromAccount.pixel).to.be.a('string');
    expect(fromAccount.links).to.deep.equal([]);
    const [off] = (await bed.send({ html_content: HTML, tracking: { open: false } })).body.data.map((d: { id: string }) => d.id);
    expect(trackingUrls(await htmlOf(off)).pixel).to.equal(null);

    const templated =
      '<html><body><a href="{{ url }}">mine</a><a href="https://x.example.net/?u={{ name }}">half</a><a href="https://static.example.net/">static</a></body></html>';
    const res = await bed.send({
      html_content: templated,
      tracking: { open: true, click: true },
      recipients: [
        { email: 'a@example.org', substitutions: { url: 'https://a.example.net/', name: 'ann' } },
        { email: 'b@example.org', substitutions: { url: 'https://b.example.net/', name: 'bob' } },
      ],
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    // MiniJinja escapes `/` in rendered values as &#x2f;.
    const [ha, hb] = (await Promise.all(res.body.data.map((d: { id: string }) => htmlOf(d.id)))).map((h) => (h as string).replace(/&#x2f;/g, '/'));
    expect(ha).to.include('href="https://a.example.net/"').and.include('https://x.example.net/?u=ann');
    expect(hb).to.include('href="https://b.example.net/"').and.include('https://x.example.net/?u=bob');
    expect(trackingUrls(ha!).links).to.have.length(1);
    const location = await trackingGet(base, trackingUrls(hb!).links[0]!);
    expect(location.headers.location).to.equal('https://static.example.net/');
  });
});
