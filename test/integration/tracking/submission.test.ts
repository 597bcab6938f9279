import { expect } from 'chai';
import { simpleParser } from 'mailparser';
import { createTransport, type SendMailOptions } from 'nodemailer';
import type { EventRecord } from '../../../src/store/records.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type Received, type SmtpSink } from '../../helpers/smtp-sink.ts';
import { trackingGet, trackingUrls } from '../../helpers/tracking.ts';

/**
 * Tracking of mail submitted over SMTP: the `ahasend-track-opens` / `ahasend-track-clicks`
 * headers switch it on or off over the account's defaults, each recipient's delivered copy gets
 * its own links, and the headers never leave the server.
 */
const HTML =
  '<html><body><p>Your order</p><a href="https://shop.example.net/order/42?x=1&amp;y=2">see it</a> <a href="mailto:help@example.com">help</a></body></html>';

describe('tracking of SMTP-submitted mail', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let sink: SmtpSink;
  let credential: { username: string; password: string };

  before(async () => {
    sink = await startSink();
    bed = await startMessageBed({
      api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } },
      delivery: { enabled: true, mx_port: sink.port },
      smtp: { submission: { enabled: true, plain_auth_from: ['127.0.0.1/32'] } },
      tracking: {},
    });
    for (const domain of ['example.org', 'example.net']) {
      bed.dns.zone.set(domain, 'MX', [{ exchange: `mx1.${domain}`, priority: 10 }]);
      bed.dns.zone.set(`mx1.${domain}`, 'A', ['127.0.0.1']);
    }
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/smtp-credentials`, { body: { name: 'app', scope: 'global' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    credential = { username: res.body.username, password: res.body.password };
  });
  after(async () => {
    await bed?.stop();
    await sink?.close();
  });
  beforeEach(() => {
    sink.received.length = 0;
  });

  async function submit(fields: Partial<SendMailOptions>): Promise<void> {
    const port = bed.server.daemon.parts.submission.ports.find((p) => !p.secure)!.port;
    const transport = createTransport({
      host: '127.0.0.1',
      port,
      secure: false,
      ignoreTLS: true,
      auth: { user: credential.username, pass: credential.password },
    });
    try {
      await transport.sendMail({
        from: 'Shop <app@example.com>',
        subject: 'Order',
        text: 'Your order: https://shop.example.net/order/42',
        html: HTML,
        ...fields,
      });
    } finally {
      transport.close();
    }
  }

  const byRecipient = (received: Received[]) => Object.fromEntries(received.map((r) => [r.to[0]!, r]));
  const htmlOf = async (r: Received) => String((await simpleParser(r.raw)).html);
  const textOf = async (r: Received) => String((await simpleParser(r.raw)).text);

  async function setAccount(trackOpens: boolean, trackClicks: boolean) {
    const res = await bed.api('PUT', `/v2/accounts/${bed.server.accountId}`, { body: { track_opens: trackOpens, track_clicks: trackClicks } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
  }

  it('tracks per recipient when the headers ask, and a click reaches the right message with its event', async () => {
    await setAccount(false, false);
    await submit({
      to: ['one@example.org', 'two@example.net'],
      headers: { 'ahasend-track-opens': 'true', 'AhaSend-Track-Clicks': 'yes' },
      encoding: 'base64',
    });
    const delivered = byRecipient(await sink.waitFor(2));
    const urls: Record<string, ReturnType<typeof trackingUrls>> = {};
    for (const rcpt of ['one@example.org', 'two@example.net']) {
      const raw = delivered[rcpt]!.raw;
      expect(raw).not.to.match(/^ahasend-track/im);
      const html = await htmlOf(delivered[rcpt]!);
      urls[rcpt] = trackingUrls(html);
      expect(urls[rcpt].pixel, html).to.match(/^https:\/\/track\.example\.com\/o\//);
      expect(urls[rcpt].links).to.have.length(1);
      expect(html).to.include('mailto:help@example.com');
      expect(html).not.to.include('shop.example.net');
      // The text part is not touched.
      expect(await textOf(delivered[rcpt]!)).to.include('https://shop.example.net/order/42');
    }
    expect(urls['one@example.org']!.links[0]).not.to.equal(urls['two@example.net']!.links[0]);

    const base = bed.server.daemon.parts.tracking.url!;
    const click = await trackingGet(base, urls['two@example.net']!.links[0]!);
    expect(click.status).to.equal(302);
    expect(click.headers.location).to.equal('https://shop.example.net/order/42?x=1&y=2');
    await bed.server.daemon.parts.tracking.drained();
    const clicks: EventRecord[] = await bed.server.daemon.core.eventsRepo.recent(bed.server.accountId, 10, 'message.clicked');
    expect(clicks).to.have.length(1);
    expect(clicks[0]!.data).to.include({ recipient: 'two@example.net', url: 'https://shop.example.net/order/42?x=1&y=2' });
  });

  it("the headers turn the account's tracking off; without them the account decides", async () => {
    await setAccount(true, true);
    await submit({ to: 'off@example.org', headers: { 'ahasend-track-opens': 'false', 'ahasend-track-clicks': '0' } });
    await submit({ to: 'clicks-only@example.org', headers: { 'ahasend-track-opens': 'no' } });
    await submit({ to: 'default@example.org' });
    const delivered = byRecipient(await sink.waitFor(3));
    const off = await htmlOf(delivered['off@example.org']!);
    expect(trackingUrls(off)).to.deep.equal({ pixel: null, links: [] });
    expect(off).to.include('https://shop.example.net/order/42');
    const clicksOnly = trackingUrls(await htmlOf(delivered['clicks-only@example.org']!));
    expect(clicksOnly.pixel).to.equal(null);
    expect(clicksOnly.links).to.have.length(1);
    const byDefault = trackingUrls(await htmlOf(delivered['default@example.org']!));
    expect(byDefault.pixel).to.be.a('string');
    expect(byDefault.links).to.have.length(1);
    await setAccount(false, false);
  });

  it('refuses a header value that is not a boolean with a 5xx naming it', async () => {
    let error: { responseCode?: number; response?: string } = {};
    try {
      await submit({ to: 'x@example.org', headers: { 'ahasend-track-clicks': 'sometimes' } });
    } catch (err) {
      error = err as typeof error;
    }
    expect(error.responseCode).to.be.within(500, 599);
    expect(error.response).to.include('ahasend-track-clicks must be true or false');
  });
});
