import { expect } from 'chai';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventsRepo } from '../../src/store/events-repo.ts';
import { Store } from '../../src/store/store.ts';
import { Child, run } from '../helpers/child.ts';
import { dkimResolver, printedRecords, publishRecords, startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startSink, type Received, type SmtpSink } from '../helpers/smtp-sink.ts';

/**
 * The daemon as a child process (`postilion start`) delivering to an smtp-server sink found as
 * the recipient domain's MX through a DNS server on loopback: the happy path, and what kill -9
 * and SIGTERM do to transactions in flight.
 */

const SENDER = 'app@example.com';

interface ApiMessage {
  id: string;
  message_id: string;
  recipient: string;
  status: string;
  num_attempts: number;
  sent_at: string | null;
  delivered_at: string | null;
  delivery_attempts: Array<{ time: string; log: string; status: string }>;
}

/** The message part of a VERP token: its id without dashes (bounces+<id><mac>@rp.<domain>). */
const tokenOf = (id: string) => id.replace(/-/g, '');
const tokenAt = (received: Received) => /^bounces\+([0-9a-f]{32})[0-9a-f]{16}@rp\.example\.com$/.exec(received.from)?.[1] ?? `unknown:${received.from}`;
/** The API id inside a Message-ID `<id@host>`. */
const idOfMessageId = (messageId: string) => messageId.slice(1, messageId.indexOf('@'));
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** How often each VERP token reached the sink. */
function copies(received: Received[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of received) counts.set(tokenAt(r), (counts.get(tokenAt(r)) ?? 0) + 1);
  return counts;
}

/** Resolves with the exit code, or fails when the child is still running after `ms`. */
async function exitWithin(child: Child, ms: number): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still running ${ms} ms after the signal:\n${child.stdout.slice(-3000)}\n${child.stderr}`)), ms);
  });
  try {
    return await Promise.race([child.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('e2e: delivery by the running daemon', function () {
  this.timeout(60_000);
  let dns: TestDnsServer;
  /** A data and keys dir with the account, its key and a DNS-valid example.com, copied per test. */
  let template: string;
  let account: string;
  let key: string;

  // Per test.
  let dir: string | null = null;
  let sink: SmtpSink | null = null;
  let children: Child[] = [];
  /** Holds the sink is keeping (released at cleanup, so the sink can close). */
  const releases: Array<() => void> = [];

  const templateConfig = (base: string) => {
    const path = join(base, 'postilion.yaml');
    writeFileSync(
      path,
      `server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]\ndns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1\n` +
        `api:\n  port: 0\ndata:\n  dir: ${join(base, 'data')}\nkeys:\n  dir: ${join(base, 'keys')}\ndelivery:\n  enabled: false\n`,
    );
    return path;
  };

  before(async () => {
    dns = await startDnsServer();
    template = mkdtempSync(join(tmpdir(), 'postilion-e2e-delivery-template-'));
    const config = templateConfig(template);
    const cli = (...args: string[]) => run(['--config', config, ...args], template);
    const init = await cli('init');
    expect(init.code, init.stderr).to.equal(0);
    account = /account id: ([0-9a-f-]{36})/.exec(init.stdout)![1]!;
    key = /aha-sk-[A-Za-z0-9]{64}/.exec(init.stdout)![0];
    const added = await cli('domains', 'add', 'example.com', '--account', account);
    expect(added.code, added.stderr).to.equal(0);
    publishRecords(dns.zone, printedRecords(added.stdout));
    const checked = await cli('domains', 'check', 'example.com');
    expect(checked.stdout, checked.stderr).to.contain('dns_valid=true');
    // The recipients' domain: its MX is the sink, found through the DNS server.
    dns.zone.set('example.org', 'MX', [{ exchange: 'mx1.example.org', priority: 10 }]);
    dns.zone.set('mx1.example.org', 'A', ['127.0.0.1']);
  });

  after(async () => {
    await dns?.close();
    if (template) rmSync(template, { recursive: true, force: true });
  });

  afterEach(async () => {
    for (const child of children) await child.kill();
    children = [];
    if (sink) {
      sink.hold = () => undefined;
      for (const release of releases.splice(0)) release();
      await sink.close();
      sink = null;
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = null;
  });

  /** A copy of the template, a sink as example.org's MX, and a config for both. */
  async function setUp(options: { concurrency?: number; graceSeconds?: number } = {}): Promise<{ sink: SmtpSink; start: () => Promise<RunningDaemon> }> {
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-delivery-'));
    cpSync(join(template, 'data'), join(dir, 'data'), { recursive: true });
    cpSync(join(template, 'keys'), join(dir, 'keys'), { recursive: true });
    sink = await startSink();
    const concurrency = options.concurrency ?? 4;
    const config = join(dir, 'postilion.yaml');
    writeFileSync(
      config,
      [
        'server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]',
        `dns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1`,
        // The tests poll the read API often.
        'api:\n  port: 0\n  rate_limits:\n    general:\n      per_second: 10000\n      burst: 100000',
        `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}`,
        `delivery:\n  enabled: true\n  mx_port: ${sink.port}\n  concurrency: ${concurrency}\n  per_destination: ${concurrency}`,
        `shutdown:\n  grace_seconds: ${options.graceSeconds ?? 5}`,
        // Not under test here; off, it binds no fixed ports and makes no certificate.
        'smtp:\n  submission:\n    enabled: false\n  inbound:\n    enabled: false',
        '',
      ].join('\n'),
    );
    const cwd = dir;
    return {
      sink,
      start: async () => {
        const child = new Child(['--config', config, 'start'], cwd);
        children.push(child);
        const url = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
        await child.waitFor(/"msg":"delivery started"/);
        return new RunningDaemon(child, `${url}/v2/accounts/${account}/messages`, key);
      },
    };
  }

  /** Holds every DATA reply from now on until the test releases it (or cleanup does). */
  function holdFromNowOn(target: SmtpSink, after = 0): void {
    let answered = 0;
    target.hold = () => (answered++ < after ? undefined : new Promise<void>((resolve) => releases.push(resolve)));
  }

  it('sends through the API to the MX found in DNS, with a DKIM signature that verifies, and reads Delivered', async () => {
    const { sink, start } = await setUp();
    const daemon = await start();
    dns.queries = [];
    const [id] = await daemon.send(['rcpt@example.org']);
    const [got] = await sink.waitFor(1);
    expect(got!.to).to.deep.equal(['rcpt@example.org']);
    const uuid = idOfMessageId(id!);
    expect(got!.from).to.match(new RegExp(`^bounces\\+${tokenOf(uuid)}[0-9a-f]{16}@rp\\.example\\.com$`));
    expect(got!.raw).to.match(new RegExp(`^Message-ID: ${id!.replace(/[.+]/g, '\\$&')}\\r$`, 'mi'));
    expect(dns.queries).to.include('MX example.org');

    // The signature verifies against the key the DNS server publishes for example.com.
    const { results } = await dkimVerify(got!.raw, { resolver: dkimResolver(dns) });
    expect(results.map((r) => [r.signingDomain, r.status.result])).to.deep.equal([['example.com', 'pass']]);

    const message = await daemon.until(id!, 'Delivered');
    expect(message.num_attempts).to.equal(1);
    expect(message.delivery_attempts).to.have.length(1);
    expect(message.delivery_attempts[0]!.status).to.equal('Delivered');
    expect(message.delivery_attempts[0]!.log).to.match(/^mx1\.example\.org: 250 /);
    expect(Date.parse(message.sent_at!)).to.be.a('number').and.not.NaN;
    expect(Date.parse(message.delivered_at!)).to.be.at.least(Date.parse(message.sent_at!));
    expect(sink.received).to.have.length(1);
  });

  /**
   * Restarts on the same data dir with an MX that answers at once, waits until every stored
   * message reads Delivered, stops cleanly, and checks the accounting: every acknowledged message
   * is stored, each reached the MX, each has one attempt on record and one delivered event.
   * Returns how often each message (by VERP token) reached the MX, in all and before the restart.
   */
  async function restartAndAccount(
    target: SmtpSink,
    start: () => Promise<RunningDaemon>,
    acknowledged: string[],
  ): Promise<{ counts: Map<string, number>; beforeRestart: Map<string, number> }> {
    target.hold = () => undefined;
    // The replies held for the killed process go to closed sockets.
    for (const release of releases.splice(0)) release();
    const beforeRestart = copies(target.received);
    const daemon = await start();
    const stored = await until(
      async () => {
        const all = await daemon.list();
        return all.every((m) => m.status === 'Delivered') ? all : null;
      },
      'every stored message Delivered',
      20_000,
    );
    const storedIds = new Set(stored.map((m) => m.id));
    for (const id of acknowledged) expect(storedIds.has(idOfMessageId(id)), `acknowledged ${id} is stored`).to.equal(true);
    const counts = copies(target.received);
    expect(
      [...counts.keys()].filter((token) => !stored.some((m) => tokenOf(m.id) === token)),
      'copies of unknown messages',
    ).to.deep.equal([]);
    for (const m of stored) {
      expect(counts.get(tokenOf(m.id)), `copies of ${m.recipient}`).to.be.at.least(1);
      // An attempt cut by the kill left no record.
      expect(m.num_attempts, `attempts of ${m.recipient}`).to.equal(1);
    }

    daemon.child.signal('SIGTERM');
    expect(await exitWithin(daemon.child, 10_000)).to.equal(0);
    const events = await eventsOf(join(dir!, 'data'), account);
    const delivered = events.filter((e) => e.type === 'message.delivered').map((e) => e.data.id as string);
    expect(delivered.sort()).to.deep.equal([...storedIds].sort());
    expect(events.filter((e) => e.type === 'message.reception')).to.have.length(stored.length);
    expect(events.filter((e) => e.type !== 'message.delivered' && e.type !== 'message.reception').map((e) => e.type)).to.deep.equal([]);
    return { counts, beforeRestart };
  }

  it('after kill -9 with deliveries in flight, delivers every accepted message; only those in flight twice', async () => {
    const { sink, start } = await setUp({ concurrency: 4 });
    // The MX answers ten messages, then holds every transaction after the DATA: four hang in flight.
    holdFromNowOn(sink, 10);
    const daemon = await start();
    const accepted = await daemon.send(Array.from({ length: 30 }, (_, i) => `r${i}@example.org`));
    expect(accepted).to.have.length(30);
    await until(() => sink.received.length === 14 && sink.held === 4, 'ten answered, four held');
    await until(async () => (await daemon.list()).filter((m) => m.status === 'Delivered').length === 10, 'ten read Delivered');
    const inFlight = new Set(sink.received.filter((r) => !r.answered).map(tokenAt));
    expect(inFlight.size).to.equal(4);

    // More sends race the kill: the acknowledged ones must survive it, the others may or may not.
    const racing = Array.from({ length: 5 }, (_, i) => daemon.send([`late${i}@example.org`]).catch(() => null));
    await Promise.race(racing);
    daemon.child.signal('SIGKILL');
    await daemon.child.exited;
    const late = (await Promise.all(racing)).filter((r) => r !== null).flat();
    expect(late.length).to.be.at.least(1);

    const { counts } = await restartAndAccount(sink, start, [...accepted, ...late]);
    // The messages received twice are exactly those in flight at the kill.
    expect(new Set([...counts].filter(([, n]) => n > 1).map(([token]) => token))).to.deep.equal(inFlight);
    expect(Math.max(...counts.values())).to.equal(2);
  });

  it('after kill -9 in the middle of a stream, sends again only what was not recorded', async () => {
    const { sink, start } = await setUp({ concurrency: 4 });
    const daemon = await start();
    // Each reply takes 50 ms, a steady stream. As the 15th DATA arrives the read API is asked
    // what is Delivered (on disk), and the process is killed as soon as the answer is in, with
    // the other transactions wherever they happen to be.
    let recorded = new Set<string>();
    let unanswered = new Set<string>();
    let receivedAtKill = 0;
    let killed: Promise<unknown> = Promise.resolve();
    sink.hold = () => {
      if (sink.received.length === 15) {
        killed = daemon.list().then((listed) => {
          recorded = new Set(listed.filter((m) => m.status === 'Delivered').map((m) => tokenOf(m.id)));
          // Taken in the same tick as the kill: the sink cannot answer in between.
          unanswered = new Set(sink.received.filter((r) => !r.answered).map(tokenAt));
          receivedAtKill = sink.received.length;
          daemon.child.signal('SIGKILL');
        });
      }
      return sleep(50);
    };
    const accepted = await daemon.send(Array.from({ length: 60 }, (_, i) => `s${i}@example.org`));
    await killed;
    await daemon.child.exited;
    expect(receivedAtKill, 'killed before the stream ended').to.be.within(15, 59);

    const { counts, beforeRestart } = await restartAndAccount(sink, start, accepted);
    const twice = new Set([...counts].filter(([, n]) => n > 1).map(([token]) => token));
    // What the read API showed Delivered was on disk: never sent again.
    for (const token of recorded) expect(counts.get(token), `${token} was recorded Delivered before the kill`).to.equal(1);
    // A transaction unanswered at the kill cannot have been recorded: it is sent again.
    for (const token of unanswered) expect(twice.has(token), `${token} was in flight`).to.equal(true);
    // A duplicate is one copy from the killed process and one from the restarted one.
    for (const token of twice) expect([beforeRestart.get(token), counts.get(token)], token).to.deep.equal([1, 2]);
  });

  it('on SIGTERM lets the transaction in flight finish, exits 0 within the grace period, and does not send it again', async () => {
    const { sink, start } = await setUp({ graceSeconds: 5 });
    // A slow MX: the reply to the DATA comes a second later.
    sink.hold = () => sleep(1000);
    let daemon = await start();
    const [id] = await daemon.send(['slow@example.org']);
    await until(() => sink.held === 1, 'the DATA held');
    const signalled = Date.now();
    daemon.child.signal('SIGTERM');
    expect(await exitWithin(daemon.child, 5000 + 2000)).to.equal(0);
    expect(Date.now() - signalled).to.be.below(5000);
    expect(sink.received).to.have.length(1);
    expect(sink.received[0]!.answered).to.equal(true);
    // The 250 was heard and recorded before the store closed.
    const lines = daemon.child.stdout.split('\n');
    const recorded = lines.findIndex((l) => l.includes('"msg":"delivery attempt"') && l.includes('"status":"Delivered"'));
    expect(recorded, daemon.child.stdout).to.be.at.least(0);
    expect(recorded).to.be.below(lines.findIndex((l) => l.includes('"msg":"stopped"')));

    sink.hold = () => undefined;
    daemon = await start();
    const message = await daemon.until(id!, 'Delivered');
    expect(message.num_attempts).to.equal(1);
    // Nothing was left due: no second copy.
    await sleep(500);
    expect(sink.received).to.have.length(1);
    daemon.child.signal('SIGTERM');
    expect(await exitWithin(daemon.child, 5000)).to.equal(0);
  });

  it('on SIGTERM cuts a transaction that outlasts the grace period, exits in time, and delivers it after the restart', async () => {
    const { sink, start } = await setUp({ graceSeconds: 1 });
    // A stalled MX: it never answers the DATA.
    holdFromNowOn(sink);
    let daemon = await start();
    const [id] = await daemon.send(['stalled@example.org']);
    await until(() => sink.held === 1, 'the DATA held');
    const signalled = Date.now();
    daemon.child.signal('SIGTERM');
    expect(await exitWithin(daemon.child, 1000 + 3000)).to.equal(0);
    expect(Date.now() - signalled).to.be.at.least(900);
    // The cut transaction is no attempt: nothing recorded, the message stays due.
    expect(daemon.child.stdout).to.contain('"msg":"stopped"').and.not.contain('"msg":"delivery attempt"');

    sink.hold = () => undefined;
    for (const release of releases.splice(0)) release();
    daemon = await start();
    // Sent again at once on the restart, not after a retry delay.
    const message = await daemon.until(id!, 'Delivered', 5000);
    expect(message.num_attempts).to.equal(1);
    // At most one duplicate: the copy the MX read but never answered.
    expect(sink.received).to.have.length(2);
    expect(copies(sink.received).get(tokenOf(idOfMessageId(id!)))).to.equal(2);
  });
});

/** A running child and its account's messages API. */
class RunningDaemon {
  constructor(
    readonly child: Child,
    private readonly messages: string,
    private readonly key: string,
  ) {}

  private get headers() {
    return { authorization: `Bearer ${this.key}`, 'content-type': 'application/json' };
  }

  /** One message per recipient; resolves with their Message-IDs (the API's message ids). */
  async send(recipients: string[]): Promise<string[]> {
    const res = await fetch(this.messages, {
      method: 'POST',
      headers: this.headers,
      body: JSON.stringify({
        from: { email: SENDER, name: 'App' },
        recipients: recipients.map((email) => ({ email })),
        subject: 'Delivery test',
        text_content: 'Hello from the delivery test.',
      }),
    });
    const body = (await res.json()) as { data: Array<{ id: string; status: string }> };
    expect(res.status, JSON.stringify(body)).to.equal(202);
    return body.data.map((d) => d.id);
  }

  async read(id: string): Promise<ApiMessage> {
    const res = await fetch(`${this.messages}/${encodeURIComponent(id)}`, { headers: this.headers });
    expect(res.status).to.equal(200);
    return (await res.json()) as ApiMessage;
  }

  /** Every message of the sender (up to 100). */
  async list(): Promise<ApiMessage[]> {
    const res = await fetch(`${this.messages}?sender=${SENDER}&limit=100`, { headers: this.headers });
    expect(res.status).to.equal(200);
    return ((await res.json()) as { data: ApiMessage[] }).data;
  }

  /** Polls the read API until the message has `status`. */
  until(id: string, status: string, timeoutMs = 10_000): Promise<ApiMessage> {
    let last: ApiMessage | null = null;
    return until(
      async () => {
        last = await this.read(id);
        return last.status === status ? last : null;
      },
      `${id} ${status}`,
      timeoutMs,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last read: ${JSON.stringify(last)}`);
    });
  }
}

/** Polls `probe` until it returns something truthy (which is returned). */
async function until<T>(probe: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await sleep(50);
  }
}

/** The events the stopped daemon stored, read from its data dir. */
async function eventsOf(dataDir: string, accountId: string) {
  const store = await Store.open(dataDir);
  try {
    return await new EventsRepo(store).recent(accountId, 10_000);
  } finally {
    await store.close();
  }
}
