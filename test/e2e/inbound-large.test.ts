import { expect } from 'chai';
import { readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTransport } from 'nodemailer';
import { main } from '../../src/cli/main.ts';
import { Child } from '../helpers/child.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * 20 parallel messages of about 24 MiB, with 10 attachments each, to the inbound MX of a daemon
 * in a child process: each is written to the store as it arrives, so the daemon's peak resident
 * memory stays bounded (printed, and held under 512 MB), and every route POST arrives.
 */
const PARALLEL = 20;
const ATTACHMENTS = 10;
/** 1.8 MiB each: base64 makes 10 of them about 24 MiB, under the 25 MiB limit. */
const ATTACHMENT_BYTES = Math.floor(1.8 * 1024 * 1024);
const RSS_BOUND_MB = 512;
const UNIT_MMAP_THRESHOLD = /^Environment=MALLOC_MMAP_THRESHOLD_=(\d+)$/m.exec(
  readFileSync(new URL('../../systemd/postilion.service', import.meta.url), 'utf8'),
)![1]!;

async function cli(config: string, ...args: string[]): Promise<string> {
  let out = '';
  let err = '';
  const code = await main(['node', 'postilion', '--config', config, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
  expect(code, `${args.join(' ')}: ${err}`).to.equal(0);
  return out;
}

const peakRssMb = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

describe('e2e: 20 parallel 24 MiB messages to the inbound MX', function () {
  this.timeout(180_000);
  let dns: TestDnsServer;
  let dir: string;
  let receiver: WebhookReceiver;
  let child: Child | null = null;

  before(async () => {
    dns = await startDnsServer();
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-inbound-large-'));
    receiver = await WebhookReceiver.start();
  });
  after(async () => {
    await child?.kill();
    await receiver.stop();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps the daemon's memory bounded and forwards every message", async () => {
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
        'smtp:\n  submission:\n    enabled: false\n  inbound:\n    port: 0',
        '',
      ].join('\n'),
    );
    const init = await cli(config, 'init');
    const account = /account id: ([0-9a-f-]{36})/.exec(init)![1]!;
    const key = /aha-sk-[A-Za-z0-9]{64}/.exec(init)![0];
    await cli(config, 'domains', 'add', 'example.com', '--account', account);
    await cli(config, 'domains', 'verify', 'example.com');
    // The daemon as its systemd unit (and `npm start`) runs it: with the unit's malloc setting.
    child = new Child(['--config', config, 'start'], dir, { MALLOC_MMAP_THRESHOLD_: UNIT_MMAP_THRESHOLD });
    const url = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
    const smtp = Number((await child.waitFor(/"port":(\d+),"msg":"inbound SMTP listening"/))[1]);
    const pid = child.pid;
    const created = await fetch(`${url}/v2/accounts/${account}/routes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'files', url: receiver.url('/files'), recipient: 'files@example.com' }),
    });
    expect(created.status).to.equal(201);
    receiver.secrets.set('/files', ((await created.json()) as { secret: string }).secret);

    const before = peakRssMb(pid);
    const attachment = Buffer.alloc(ATTACHMENT_BYTES, 'Postilion ');
    const sends = Array.from({ length: PARALLEL }, (_, i) =>
      createTransport({ host: '127.0.0.1', port: smtp, secure: false, ignoreTLS: true }).sendMail({
        from: 'c@example.net',
        to: 'files@example.com',
        subject: `files ${i}`,
        text: `message ${i}`,
        attachments: Array.from({ length: ATTACHMENTS }, (_, a) => ({ filename: `part-${a}.bin`, content: attachment })),
      }),
    );
    const infos = await Promise.all(sends);
    for (const info of infos) expect(info.response).to.match(/^250 /);
    await receiver.until((r) => r.length >= PARALLEL, 120_000);
    const peak = peakRssMb(pid);
    process.stdout.write(`      peak RSS of the daemon: ${peak.toFixed(0)} MB (${before.toFixed(0)} MB before the messages)\n`);
    expect(peak).to.be.below(RSS_BOUND_MB);
    expect(new Set(receiver.verified('/files').map((d) => d.payload!.data.subject))).to.have.length(PARALLEL);
    for (const d of receiver.verified('/files')) expect(d.payload!.data.size).to.be.above(24 * 1024 * 1024);
  });
});
