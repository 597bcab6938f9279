import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { simpleParser } from 'mailparser';
import { createTransport } from 'nodemailer';
import { checkedCli, Child, initialised } from '../helpers/child.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startSink, type SmtpSink } from '../helpers/smtp-sink.ts';
import { trackingGet, trackingUrls } from '../helpers/tracking.ts';
import { WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Metrics of everything that moves, scraped from a real daemon (a child process): webhook
 * deliveries and route POSTs by outcome and their backlog, inbound sessions, recipients and
 * messages, tracking requests and hits (counted in the tracking listener's thread and brought
 * to the daemon's registry).
 */
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
const BROWSER = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/** `name{labels} value` lines of an exposition, as a map from the series to its value. */
function series(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

describe('e2e: /metrics after webhook deliveries, a route POST, inbound sessions and tracking hits', function () {
  this.timeout(90_000);
  let dns: TestDnsServer;
  let sink: SmtpSink;
  let receiver: WebhookReceiver;
  let dir: string;
  let child: Child | null = null;

  before(async () => {
    dns = await startDnsServer();
    sink = await startSink();
    receiver = await WebhookReceiver.start();
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-metrics-'));
  });

  after(async () => {
    await child?.kill();
    await receiver?.stop();
    await sink?.close();
    await dns?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('moves the delivery, backlog, inbound and tracking series', async () => {
    const config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      [
        'server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]',
        `dns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1`,
        'api:\n  port: 0',
        `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}`,
        `delivery:\n  enabled: true\n  transport:\n    example.org:\n      host: 127.0.0.1\n      port: ${sink.port}\n      tls: "off"`,
        'webhooks:\n  allow_networks: [127.0.0.1/32]',
        'tracking:\n  port: 0\n  link_scheme: http\n  scanner_seconds: 0',
        'smtp:\n  submission:\n    enabled: false\n  inbound:\n    port: 0',
        'metrics:\n  port: 0\n  queue_refresh_seconds: 1',
        'shutdown:\n  grace_seconds: 2',
        '',
      ].join('\n'),
    );
    const cli = checkedCli(config, dir);
    const { accountId: account, key } = initialised(await cli('init'));
    await cli('domains', 'add', 'example.com', '--account', account);
    await cli('domains', 'verify', 'example.com');

    child = new Child(['--config', config, 'start'], dir);
    const api = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
    const tracking = (await child.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"tracking listening"/))[1]!;
    const inbound = Number((await child.waitFor(/"port":(\d+),"msg":"inbound SMTP listening"/))[1]);
    const metrics = (await child.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"metrics listening"/))[1]!;
    const scrape = async () => series(await (await fetch(`${metrics}/metrics`)).text());
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes
    const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
      const res = await fetch(`${api}/v2/accounts/${account}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: await res.json() };
    };

    // Before anything moved: no delivery, inbound or tracking series counts anything.
    const before = await scrape();
    for (const [name, value] of before) {
      if (/^postilion_(http_deliveries_total|inbound_|tracking_)/.test(name) || /^postilion_smtp_\w+\{listener="inbound"/.test(name))
        expect(value, name).to.equal(0);
    }

    // A webhook that takes every event, one that refuses them (500: retried, so it stays in the backlog), a route.
    const hook = await call('POST', '/webhooks', {
      name: 'all',
      url: receiver.url('/hooks'),
      scope: 'global',
      ...Object.fromEntries(FLAGS.map((f) => [f, true])),
    });
    expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
    receiver.secrets.set('/hooks', hook.body.secret);
    const refusing = await call('POST', '/webhooks', {
      name: 'refusing',
      url: receiver.url('/refuse'),
      scope: 'global',
      ...Object.fromEntries(FLAGS.map((f) => [f, f === 'on_reception'])),
    });
    expect(refusing.status, JSON.stringify(refusing.body)).to.equal(201);
    receiver.answer = (d) => (d.path === '/refuse' ? 500 : d.payload ? 204 : 400);
    const route = await call('POST', '/routes', { name: 'support', url: receiver.url('/inbound'), recipient: 'support@example.com' });
    expect(route.status, JSON.stringify(route.body)).to.equal(201);
    receiver.secrets.set('/inbound', route.body.secret);

    // Tracked mail, delivered, then opened and clicked; and a click whose token does not verify.
    const sent = await call('POST', '/messages', {
      from: { email: 'shop@example.com' },
      recipients: [{ email: 'ann@example.org' }],
      subject: 'Your order',
      html_content: '<html><body><a href="https://shop.example.net/orders/7">Your order</a></body></html>',
      tracking: { open: true, click: true },
    });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    const [delivered] = await sink.waitFor(1);
    const urls = trackingUrls(String((await simpleParser(delivered!.raw)).html));
    const id = sent.body.data[0].id as string;
    const deadline = Date.now() + 10_000;
    while ((await call('GET', `/messages/${encodeURIComponent(id)}`)).body.status !== 'Delivered') {
      if (Date.now() > deadline) throw new Error(`${id} not delivered`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await trackingGet(tracking, urls.pixel!, { 'user-agent': BROWSER })).status).to.equal(200);
    expect((await trackingGet(tracking, urls.links[0]!, { 'user-agent': BROWSER })).status).to.equal(302);
    expect((await trackingGet(tracking, urls.links[0]!.replace(/\/c\/.*/, '/c/AAAAAAAAAAAAAAAAAAAAAAAA'), { 'user-agent': BROWSER })).status).to.equal(404);

    // Inbound: one message to the route, one session that tries to relay and is refused.
    const transport = createTransport({ host: '127.0.0.1', port: inbound, secure: false, ignoreTLS: true, pool: false });
    const info = await transport.sendMail({ from: 'c@example.net', to: 'support@example.com', subject: 'help', text: 'please' });
    expect(info.response).to.match(/^250 /);
    const relay = await transport.sendMail({ from: 'c@example.net', to: 'someone@elsewhere.example', subject: 'relay?', text: 'x' }).then(
      () => 'sent',
      (err: Error) => err.message,
    );
    expect(relay).to.match(/550/);
    transport.close();

    await receiver.until((got) => {
      const types = got.filter((d) => d.path === '/hooks').map((d) => d.payload?.type);
      return ['message.delivered', 'message.opened', 'message.clicked'].every((t) => types.includes(t)) && got.some((d) => d.path === '/inbound');
    }, 20_000);

    // Sessions are counted when they close, deliveries once their outcome is written: wait for them (bounded).
    const wanted: Record<string, (v: number) => boolean> = {
      'postilion_http_deliveries_total{kind="webhook",outcome="delivered"}': (v) => v >= 4,
      'postilion_http_deliveries_total{kind="webhook",outcome="retry"}': (v) => v >= 1,
      'postilion_http_deliveries_total{kind="route",outcome="delivered"}': (v) => v === 1,
      'postilion_http_jobs{kind="webhook",state="pending"}': (v) => v >= 1,
      'postilion_http_jobs{kind="route",state="pending"}': (v) => v === 0,
      'postilion_smtp_sessions_total{listener="inbound",result="message"}': (v) => v === 1,
      'postilion_smtp_sessions_total{listener="inbound",result="none"}': (v) => v === 1,
      'postilion_smtp_commands_total{listener="inbound",command="CONNECT",result="accepted"}': (v) => v === 2,
      'postilion_smtp_commands_total{listener="inbound",command="RCPT",result="rejected"}': (v) => v === 1,
      'postilion_inbound_recipients_total{listener="inbound",verdict="route"}': (v) => v === 1,
      'postilion_inbound_recipients_total{listener="inbound",verdict="refused"}': (v) => v === 1,
      'postilion_inbound_messages_total{listener="inbound",result="accepted"}': (v) => v === 1,
      'postilion_tracking_requests_total{listener="tracking",kind="open",status="200"}': (v) => v === 1,
      'postilion_tracking_requests_total{listener="tracking",kind="click",status="302"}': (v) => v === 1,
      'postilion_tracking_requests_total{listener="tracking",kind="click",status="404"}': (v) => v === 1,
      'postilion_tracking_hits_total{listener="tracking",kind="open"}': (v) => v === 1,
      'postilion_tracking_hits_total{listener="tracking",kind="click"}': (v) => v === 1,
    };
    let m = await scrape();
    const missing = () =>
      Object.entries(wanted)
        .filter(([name, ok]) => !(m.has(name) && ok(m.get(name)!)))
        .map(([name]) => `${name} = ${m.get(name)}`);
    for (let i = 0; i < 100 && missing().length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      m = await scrape();
    }
    expect(missing()).to.deep.equal([]);

    child.signal('SIGTERM');
    expect(await child.exited).to.equal(0);
  });
});
