import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTransport } from 'nodemailer';
import { main } from '../../src/cli/main.ts';
import { Child } from '../helpers/child.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * kill -9 after the 250 and before the route POST: the daemon as a child process, a route whose
 * endpoint is not listening yet, mail to the inbound MX. After the kill the daemon starts again
 * on the same data directory with the endpoint up, and every message's POST arrives, verified.
 */
const MESSAGES = 20;

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function cli(config: string, ...args: string[]): Promise<string> {
  let out = '';
  let err = '';
  const code = await main(['node', 'postilion', '--config', config, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
  expect(code, `${args.join(' ')}: ${err}`).to.equal(0);
  return out;
}

describe('e2e: kill -9 between the inbound 250 and the route POST', function () {
  this.timeout(60_000);
  let dns: TestDnsServer;
  let dir: string;
  let receiver: WebhookReceiver | null = null;
  const children: Child[] = [];

  before(async () => {
    dns = await startDnsServer();
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-inbound-'));
  });
  after(async () => {
    for (const child of children) await child.kill();
    await receiver?.stop();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the POST of every accepted message arrives after a restart', async () => {
    const config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      [
        'server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]',
        `dns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1`,
        'api:\n  port: 0',
        `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}`,
        'delivery:\n  enabled: false',
        'webhooks:\n  allow_networks: [127.0.0.1/32]',
        'shutdown:\n  grace_seconds: 2',
        'smtp:\n  submission:\n    enabled: false\n  inbound:\n    port: 0',
        '',
      ].join('\n'),
    );
    const init = await cli(config, 'init');
    const account = /account id: ([0-9a-f-]{36})/.exec(init)![1]!;
    const key = /aha-sk-[A-Za-z0-9]{64}/.exec(init)![0];
    await cli(config, 'domains', 'add', 'example.com', '--account', account);
    await cli(config, 'domains', 'verify', 'example.com');

    const start = async () => {
      const child = new Child(['--config', config, 'start'], dir);
      children.push(child);
      const url = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
      const smtp = Number((await child.waitFor(/"port":(\d+),"msg":"inbound SMTP listening"/))[1]);
      return { child, url, smtp };
    };
    const first = await start();
    const endpoint = await freePort();
    const created = await fetch(`${first.url}/v2/accounts/${account}/routes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'support', url: `http://127.0.0.1:${endpoint}/inbound`, recipient: 'support@example.com' }),
    });
    const route = (await created.json()) as { id: string; secret: string };
    expect(created.status).to.equal(201);

    const transport = createTransport({ host: '127.0.0.1', port: first.smtp, secure: false, ignoreTLS: true, pool: false });
    for (let i = 0; i < MESSAGES; i++) {
      const info = await transport.sendMail({ from: 'c@example.net', to: 'support@example.com', subject: `ticket ${i}`, text: `message ${i}` });
      expect(info.response).to.match(/^250 /);
    }
    // kill -9: every message has had its 250, no POST has been made (the endpoint is down).
    await first.child.kill();

    receiver = await WebhookReceiver.start(endpoint);
    receiver.secrets.set('/inbound', route.secret);
    await start();
    await receiver.until((r) => new Set(r.map((d) => d.payload?.data.subject)).size >= MESSAGES, 30_000);
    const subjects = receiver.verified('/inbound').map((d) => d.payload!.data.subject as string);
    expect(new Set(subjects)).to.deep.equal(new Set(Array.from({ length: MESSAGES }, (_, i) => `ticket ${i}`)));
    expect(receiver.received.every((d) => d.payload !== null)).to.equal(true);
  });
});
