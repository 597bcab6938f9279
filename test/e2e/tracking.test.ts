import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { simpleParser } from 'mailparser';
import { checkedCli, Child, initialised } from '../helpers/child.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startSink, type SmtpSink } from '../helpers/smtp-sink.ts';
import { trackingGet, trackingUrls } from '../helpers/tracking.ts';
import { WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Tracking end to end with the daemon as a child process: mail sent with tracking through the
 * API and delivered to a sink MX, its pixel and link fetched from the tracking listener the way a
 * mail client would, the `message.opened` / `message.clicked` webhooks verified by a receiver
 * with the `standardwebhooks` package, and the counts read back from the statistics API.
 */
const BROWSER = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
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

describe('e2e: tracked mail, opened and clicked', function () {
  this.timeout(60_000);
  let dns: TestDnsServer;
  let sink: SmtpSink;
  let receiver: WebhookReceiver;
  let dir: string;
  let child: Child | null = null;

  before(async () => {
    dns = await startDnsServer();
    sink = await startSink();
    receiver = await WebhookReceiver.start();
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-tracking-'));
  });

  after(async () => {
    await child?.kill();
    await receiver?.stop();
    await sink?.close();
    await dns?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('delivers per-recipient links, redirects a click, sends both webhooks and counts both', async () => {
    const config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      [
        'server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]',
        `dns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1`,
        'api:\n  port: 0\n  rate_limits:\n    statistics:\n      per_second: 100\n      burst: 100',
        `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}`,
        `delivery:\n  enabled: true\n  transport:\n    example.org:\n      host: 127.0.0.1\n      port: ${sink.port}\n      tls: "off"`,
        'webhooks:\n  allow_networks: [127.0.0.1/32]',
        // A click at once after delivery would be flagged as a link scanner's.
        'tracking:\n  port: 0\n  link_scheme: http\n  scanner_seconds: 0',
        'smtp:\n  submission:\n    enabled: false\n  inbound:\n    enabled: false',
        'shutdown:\n  grace_seconds: 2',
        '',
      ].join('\n'),
    );
    const cli = checkedCli(config, dir);
    const { accountId: account, key } = initialised(await cli('init'));
    await cli('domains', 'add', 'example.com', '--account', account);
    await cli('domains', 'verify', 'example.com');

    child = new Child(['--config', config, 'start'], dir, { POSTILION_TRACKING__PORT: '0' });
    const api = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
    const tracking = (await child.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"tracking listening"/))[1]!;
    await child.waitFor(/"msg":"delivery started"/);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes
    const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
      const res = await fetch(`${api}/v2/accounts/${account}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: await res.json() };
    };

    const hook = await call('POST', '/webhooks', {
      name: 'tracking',
      url: receiver.url('/hooks'),
      scope: 'global',
      ...Object.fromEntries(FLAGS.map((f) => [f, f === 'on_opened' || f === 'on_clicked'])),
    });
    expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
    receiver.secrets.set('/hooks', hook.body.secret);

    const sent = await call('POST', '/messages', {
      from: { email: 'shop@example.com' },
      recipients: [{ email: 'ann@example.org' }, { email: 'bob@example.org' }],
      subject: 'Your order',
      html_content: '<html><body><p>Thanks!</p><a href="https://shop.example.net/orders/7">Your order</a></body></html>',
      tracking: { open: true, click: true },
    });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    const idOf = Object.fromEntries(sent.body.data.map((d: { id: string; recipient: { email: string } }) => [d.recipient.email, d.id]));

    const delivered = await sink.waitFor(2);
    const urls = Object.fromEntries(await Promise.all(delivered.map(async (r) => [r.to[0]!, trackingUrls(String((await simpleParser(r.raw)).html))] as const)));
    expect(urls['bob@example.org']!.links).to.have.length(1);
    expect(urls['bob@example.org']!.pixel).to.match(/^http:\/\/track\.example\.com\/o\//);
    expect(urls['ann@example.org']!.links[0]).not.to.equal(urls['bob@example.org']!.links[0]);
    // Delivered (read from the API) before the hits, as in life.
    for (const id of Object.values(idOf)) {
      const deadline = Date.now() + 10_000;
      while ((await call('GET', `/messages/${encodeURIComponent(id as string)}`)).body.status !== 'Delivered') {
        if (Date.now() > deadline) throw new Error(`${id} not delivered`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }

    // Bob opens twice and clicks; nobody else does anything.
    for (let i = 0; i < 2; i++) expect((await trackingGet(tracking, urls['bob@example.org']!.pixel!, { 'user-agent': BROWSER })).status).to.equal(200);
    const click = await trackingGet(tracking, urls['bob@example.org']!.links[0]!, { 'user-agent': BROWSER, 'x-forwarded-for': '198.51.100.7' });
    expect(click.status).to.equal(302);
    expect(click.headers.location).to.equal('https://shop.example.net/orders/7');

    await receiver.until(
      (got) => got.filter((d) => d.payload?.type === 'message.clicked').length === 1 && got.filter((d) => d.payload?.type === 'message.opened').length === 2,
    );
    const events = receiver.verified('/hooks');
    expect(
      receiver.received.every((d) => d.payload !== null),
      'every request verifies',
    ).to.equal(true);
    for (const event of events) {
      expect(event.payload!.data).to.include({
        recipient: 'bob@example.org',
        id: (idOf['bob@example.org'] as string).replace(/^<|@.*$/g, ''),
        is_bot: false,
        user_agent: BROWSER,
      });
    }
    expect(events.find((d) => d.payload!.type === 'message.clicked')!.payload!.data).to.include({ url: 'https://shop.example.net/orders/7' });

    // Counted once per message: two opens of Bob's message are one opened message.
    const today = new Date();
    today.setUTCHours(0, 0, 0, 0);
    const window = `from_time=${today.toISOString()}&to_time=${new Date(today.getTime() + 86_400_000).toISOString()}&group_by=day`;
    const stats = await call('GET', `/statistics/transactional/deliverability?${window.replace(/\.000Z/g, 'Z')}`);
    expect(stats.status, JSON.stringify(stats.body)).to.equal(200);
    expect(stats.body.data).to.have.length(1);
    expect(stats.body.data[0]).to.include({ reception_count: 2, delivered_count: 2, opened_count: 1, clicked_count: 1, bounced_count: 0 });
    const otherDomain = await call('GET', `/statistics/transactional/deliverability?${window.replace(/\.000Z/g, 'Z')}&recipient_domains=example.net`);
    expect(otherDomain.status).to.equal(200);
    expect(otherDomain.body.data[0]).to.include({ reception_count: 0, opened_count: 0 });

    child.signal('SIGTERM');
    expect(await child.exited).to.equal(0);
  });
});
