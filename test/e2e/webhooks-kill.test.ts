import { expect } from 'chai';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/main.ts';
import { validateConfig } from '../../src/config/load.ts';
import type { JobRecord } from '../../src/store/records.ts';
import { JobIndex } from '../../src/store/job-index.ts';
import { JobsRepo } from '../../src/store/jobs-repo.ts';
import { Store } from '../../src/store/store.ts';
import { Child } from '../helpers/child.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { WebhookReceiver, type Delivery } from '../helpers/webhook-receiver.ts';

/**
 * kill -9 with a thousand webhook deliveries pending: the daemon as a child process, one webhook
 * (on_reception only) to a receiver on loopback, a thousand sandbox messages. After the kill the
 * daemon is started again on the same data directory with the receiver answering: every event
 * arrives, verified with the `standardwebhooks` package, and only deliveries that were in flight
 * at the kill arrive twice.
 */

const MESSAGES = 1000;
/** `webhooks.per_origin`: requests in flight at once to the receiver. */
const PER_ORIGIN = 4;
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
const RECEPTION_ONLY = { ...Object.fromEntries(FLAGS.map((f) => [f, false])), on_reception: true };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until<T>(probe: () => T | null | false | Promise<T | null | false>, what: string, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** A port on 127.0.0.1 that nothing listens on now (the receiver takes it later). */
async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Whether this release's configuration has the inbound SMTP listener (then it is turned off). */
function hasInboundListener(): boolean {
  try {
    validateConfig({ smtp: { inbound: { enabled: false } } }, 'probe');
    return true;
  } catch {
    return false;
  }
}

function writeConfig(dir: string, dns: TestDnsServer): string {
  const path = join(dir, 'postilion.yaml');
  writeFileSync(
    path,
    [
      'server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]',
      `dns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1`,
      'api:\n  port: 0\n  rate_limits:\n    general:\n      per_second: 10000\n      burst: 100000',
      `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}`,
      // Sandbox mail only: nothing to deliver by SMTP.
      'delivery:\n  enabled: false',
      `webhooks:\n  per_origin: ${PER_ORIGIN}\n  allow_networks: [127.0.0.1/32]`,
      'shutdown:\n  grace_seconds: 2',
      `smtp:\n  submission:\n    enabled: false${hasInboundListener() ? '\n  inbound:\n    enabled: false' : ''}`,
      '',
    ].join('\n'),
  );
  return path;
}

/** Runs `postilion` in this process (the CLI's own code), against the store or the daemon's socket. */
async function cli(config: string, ...args: string[]): Promise<string> {
  let out = '';
  let err = '';
  const code = await main(['node', 'postilion', '--config', config, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
  expect(code, `${args.join(' ')}: ${err}`).to.equal(0);
  return out;
}

/** Every job record in a stopped daemon's store. */
async function storedJobs(dir: string): Promise<JobRecord[]> {
  const store = await Store.open(join(dir, 'data'));
  try {
    const jobs: JobRecord[] = [];
    for await (const job of new JobsRepo(store, new JobIndex(store)).list('webhook')) jobs.push(job);
    return jobs;
  } finally {
    await store.close();
  }
}

describe('e2e: kill -9 with a thousand webhook deliveries pending', function () {
  this.timeout(60_000);
  let dns: TestDnsServer;
  /** Data and keys with the account, its key and example.com verified by hand; copied per test. */
  let template: string;
  let account: string;
  let key: string;

  let dir: string | null = null;
  let children: Child[] = [];
  let receiver: WebhookReceiver | null = null;

  before(async () => {
    dns = await startDnsServer();
    template = mkdtempSync(join(tmpdir(), 'postilion-e2e-webhooks-template-'));
    const config = writeConfig(template, dns);
    const init = await cli(config, 'init');
    account = /account id: ([0-9a-f-]{36})/.exec(init)![1]!;
    key = /aha-sk-[A-Za-z0-9]{64}/.exec(init)![0];
    await cli(config, 'domains', 'add', 'example.com', '--account', account);
    await cli(config, 'domains', 'verify', 'example.com');
  });

  after(async () => {
    await dns?.close();
    if (template) rmSync(template, { recursive: true, force: true });
  });

  afterEach(async () => {
    for (const child of children) await child.kill();
    children = [];
    await receiver?.stop();
    receiver = null;
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = null;
  });

  interface Running {
    child: Child;
    api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON of many shapes
  }

  async function setUp(): Promise<{ config: string; start: () => Promise<Running> }> {
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-webhooks-'));
    cpSync(join(template, 'data'), join(dir, 'data'), { recursive: true });
    cpSync(join(template, 'keys'), join(dir, 'keys'), { recursive: true });
    const config = writeConfig(dir, dns);
    const cwd = dir;
    return {
      config,
      start: async () => {
        const child = new Child(['--config', config, 'start'], cwd);
        children.push(child);
        const url = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
        await child.waitFor(/"msg":"job engine started"/);
        return {
          child,
          api: async (method, path, body) => {
            const res = await fetch(`${url}/v2/accounts/${account}${path}`, {
              method,
              headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
              ...(body === undefined ? {} : { body: JSON.stringify(body) }),
            });
            return { status: res.status, body: await res.json() };
          },
        };
      },
    };
  }

  /** The webhook, then a thousand sandbox messages in requests of 100 recipients (r0…r999@example.org). */
  async function webhookAndMail(daemon: Running, url: string, to: WebhookReceiver | null = null): Promise<{ id: string; secret: string }> {
    const created = await daemon.api('POST', '/webhooks', { name: 'kill', url, scope: 'global', ...RECEPTION_ONLY });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    to?.secrets.set(new URL(url).pathname, created.body.secret);
    for (let first = 0; first < MESSAGES; first += 100) {
      const recipients = Array.from({ length: 100 }, (_, i) => ({ email: `r${first + i}@example.org` }));
      const sent = await daemon.api('POST', '/messages', {
        from: { email: 'app@example.com' },
        recipients,
        subject: 'Hi',
        text_content: 'Hello',
        sandbox: true,
      });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    }
    return { id: created.body.id, secret: created.body.secret };
  }

  /** Webhook deliveries stored for the origin, whatever their state (`queue status`, over the socket). */
  async function storedFor(config: string, origin: string): Promise<number> {
    const status = JSON.parse(await cli(config, 'queue', 'status', '--json')) as { jobs: Array<Record<string, number | string>> };
    const row = status.jobs.find((j) => j.kind === 'webhook' && j.destination === origin);
    if (!row) return 0;
    // Every counter but `due` (a part of pending) is a state a stored delivery is in.
    return Object.entries(row).reduce((sum, [name, n]) => (typeof n === 'number' && name !== 'due' ? sum + n : sum), 0);
  }

  /** Waits for every recipient's event, then a little more for stragglers. */
  async function receiveAll(r: WebhookReceiver): Promise<Delivery[]> {
    await r.until((got) => new Set(got.map((d) => d.headers['webhook-id'])).size >= MESSAGES, 20_000);
    await sleep(500);
    return r.received;
  }

  /** Every event once or more, every request verified; returns the delivery ids received more than once. */
  function checkEveryEvent(got: Delivery[], webhookId: string): Set<string> {
    expect(
      got.filter((d) => d.payload === null).map((d) => d.error),
      'requests that do not verify',
    ).to.deep.equal([]);
    const byId = new Map<string, Delivery[]>();
    for (const d of got) byId.set(d.headers['webhook-id'] as string, [...(byId.get(d.headers['webhook-id'] as string) ?? []), d]);
    expect(byId.size, 'deliveries').to.equal(MESSAGES);
    const recipients = new Set<string>();
    for (const copies of byId.values()) {
      // A delivery sent again carries the same event.
      expect(new Set(copies.map((d) => d.payload!.data.message_id_header)).size).to.equal(1);
      expect(copies[0]!.payload).to.include({ type: 'message.reception', webhook_id: webhookId });
      recipients.add(copies[0]!.payload!.data.recipient as string);
    }
    expect(recipients).to.deep.equal(new Set(Array.from({ length: MESSAGES }, (_, i) => `r${i}@example.org`)));
    return new Set([...byId].filter(([, copies]) => copies.length > 1).map(([id]) => id));
  }

  it('with the receiver not listening: after the restart every event arrives exactly once', async () => {
    const { config, start } = await setUp();
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const daemon = await start();
    const hook = await webhookAndMail(daemon, `${origin}/hook`);
    // Refused connections: the origin is found down and its deliveries wait, parked.
    await daemon.child.waitFor(/"msg":"webhook endpoint not answering; deliveries wait"/);
    await until(async () => (await storedFor(config, origin)) === MESSAGES, 'a thousand deliveries stored');
    daemon.child.signal('SIGKILL');
    await daemon.child.exited;

    // What the killed process left: every delivery waiting, none sent, none given up.
    const left = await storedJobs(dir!);
    expect(left).to.have.length(MESSAGES);
    expect(left.filter((j) => j.state !== 'pending' && j.state !== 'parked').map((j) => j.state)).to.deep.equal([]);
    expect(
      left.every((j) => j.attempts === 0),
      'refused connections use up no attempt',
    ).to.equal(true);

    receiver = await WebhookReceiver.start(port);
    receiver.secrets.set('/hook', hook.secret);
    const restarted = await start();
    const twice = checkEveryEvent(await receiveAll(receiver), hook.id);
    expect([...twice], 'nothing was in flight at the kill').to.deep.equal([]);
    expect(receiver.received).to.have.length(MESSAGES);

    const counted = await restarted.api('GET', `/webhooks/${hook.id}`);
    expect(counted.body).to.include({ success_count: MESSAGES, errors_since_last_success: 0, enabled: true });
    restarted.child.signal('SIGTERM');
    expect(await restarted.child.exited).to.equal(0);
    expect(await storedJobs(dir!), 'delivered jobs are deleted').to.deep.equal([]);
  });

  it('with a receiver that does not answer: only the deliveries in flight at the kill arrive twice', async () => {
    const { config, start } = await setUp();
    receiver = await WebhookReceiver.start();
    const origin = `http://127.0.0.1:${receiver.port}`;
    // It reads each request and never answers (the daemon would give up after 10 s).
    receiver.answer = () => 'hang';
    const daemon = await start();
    const hook = await webhookAndMail(daemon, `${origin}/hook`, receiver);
    await until(async () => (await storedFor(config, origin)) === MESSAGES, 'a thousand deliveries stored');
    await receiver.until((got) => got.length === PER_ORIGIN);
    await sleep(200);
    expect(receiver.received, 'requests in flight at once').to.have.length(PER_ORIGIN);
    const inFlight = new Set(receiver.received.map((d) => d.headers['webhook-id'] as string));
    daemon.child.signal('SIGKILL');
    await daemon.child.exited;
    expect((await storedJobs(dir!)).filter((j) => j.state === 'pending')).to.have.length(MESSAGES);

    receiver.answer = (d) => (d.payload ? 204 : 400);
    await start();
    const twice = checkEveryEvent(await receiveAll(receiver), hook.id);
    expect(twice).to.deep.equal(inFlight);
    expect(twice.size).to.be.at.most(PER_ORIGIN);
    expect(receiver.received).to.have.length(MESSAGES + inFlight.size);
  });
});
