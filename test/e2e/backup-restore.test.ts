import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { simpleParser } from 'mailparser';
import { checkedCli, Child, initialised, run } from '../helpers/child.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { RawSmtp } from '../helpers/raw-smtp.ts';
import { startSink, type SmtpSink } from '../helpers/smtp-sink.ts';
import { trackingGet, trackingUrls } from '../helpers/tracking.ts';

/**
 * `postilion backup` of a running daemon while mail is being accepted, `postilion restore` into
 * another data and keys directory, and the restored daemon (a child process) carrying on: it
 * delivers the queue it was given to a sink, redirects the links of mail sent before the backup
 * (tracking.key), and takes a late bounce to a VERP return path of that mail (verp.key).
 */
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/bounces');
const FIXTURE_TOKEN = 'bounces+01a1fdfb344872909b0f9bd172324b836a1b2c3d4e5f6071@rp.example.com';
const FIXTURE_MESSAGE_ID = '<01a1fdfb-3448-7290-b0f9-bd172324b836@example.com>';
const BROWSER = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
const GREYLISTED = { code: 451, text: '4.7.1 Greylisted, try again later' };

describe('e2e: backup of a running daemon, restored elsewhere', function () {
  this.timeout(300_000);
  let dns: TestDnsServer;
  /** The first daemon's MX for example.org: takes the tracked mail. */
  let delivered: SmtpSink;
  /** The first daemon's MX for queued.example: answers 451, so that mail stays queued. */
  let greylist: SmtpSink;
  /** The restored daemon's MX for both. */
  let restoredSink: SmtpSink;
  let dir: string;
  const children: Child[] = [];
  /** The load of the test runs while this is true (a failing test stops it too). */
  let loading = false;

  before(async () => {
    dns = await startDnsServer();
    delivered = await startSink();
    greylist = await startSink();
    greylist.rcpt = () => GREYLISTED;
    restoredSink = await startSink();
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-backup-'));
  });

  after(async () => {
    loading = false;
    for (const child of children) await child.kill();
    for (const sink of [delivered, greylist, restoredSink]) await sink?.close();
    await dns?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function writeConfig(name: string, sinks: { tracked: number; queued: number }, inbound: boolean): string {
    const path = join(dir, `${name}.yaml`);
    writeFileSync(
      path,
      [
        'server:\n  hostname: mx.postilion.test\n  sending_ips: [192.0.2.10]',
        `dns:\n  servers: ["${dns.address}"]\n  timeout_ms: 500\n  tries: 1`,
        'api:\n  port: 0\n  rate_limits:\n    general:\n      per_second: 10000\n      burst: 10000',
        `data:\n  dir: ${join(dir, name, 'data')}\nkeys:\n  dir: ${join(dir, name, 'keys')}`,
        // Deferred mail is tried again within seconds (the restored daemon keeps each message's next attempt).
        'delivery:\n  enabled: true\n  retry:\n    first_delay_seconds: 1\n    max_delay_seconds: 2\n  transport:',
        `    example.org:\n      host: 127.0.0.1\n      port: ${sinks.tracked}\n      tls: "off"`,
        `    queued.example:\n      host: 127.0.0.1\n      port: ${sinks.queued}\n      tls: "off"`,
        'tracking:\n  port: 0\n  link_scheme: http\n  scanner_seconds: 0',
        `smtp:\n  submission:\n    enabled: false\n  inbound:\n    enabled: ${inbound}\n    host: 127.0.0.1\n    port: 0`,
        'shutdown:\n  grace_seconds: 2',
        '',
      ].join('\n'),
    );
    return path;
  }

  async function start(config: string): Promise<{ child: Child; api: string; tracking: string }> {
    const child = new Child(['--config', config, 'start'], dir, { POSTILION_TRACKING__PORT: '0' });
    children.push(child);
    // Generous: other test runs share this machine's two cores.
    const api = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/, 90_000))[1]!;
    const tracking = (await child.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"tracking listening"/))[1]!;
    await child.waitFor(/"msg":"delivery started"/);
    return { child, api, tracking };
  }

  it('copies store and keys under load; the restored daemon delivers the queue and verifies old links and VERP tokens', async () => {
    const firstConfig = writeConfig('first', { tracked: delivered.port, queued: greylist.port }, false);
    const cli = checkedCli(firstConfig, dir);
    const { accountId: account, key } = initialised(await cli('init'));
    await cli('domains', 'add', 'example.com', '--account', account);
    await cli('domains', 'verify', 'example.com');
    const first = await start(firstConfig);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes
    const call = async (api: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
      const res = await fetch(`${api}/v2/accounts/${account}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: await res.json() };
    };

    // Mail sent and delivered before the backup: its link and its return path must outlive the move.
    const tracked = await call(first.api, 'POST', '/messages', {
      from: { email: 'shop@example.com' },
      recipients: [{ email: 'ann@example.org' }],
      subject: 'Your order',
      html_content: '<html><body><a href="https://shop.example.net/orders/7">Your order</a></body></html>',
      tracking: { open: true, click: true },
    });
    expect(tracked.status, JSON.stringify(tracked.body)).to.equal(202);
    const trackedId = tracked.body.data[0].id as string;
    const [mail] = await delivered.waitFor(1);
    const link = trackingUrls(String((await simpleParser(mail!.raw)).html)).links[0]!;
    const returnPath = mail!.from;
    expect(returnPath).to.match(/^bounces\+[0-9a-f]{48}@rp\.example\.com$/);

    // Load: mail accepted one request after the other (to queued.example, greylisted: it stays
    // queued) while the backup runs.
    const acceptedBefore: string[] = [];
    const acceptedAll: string[] = [];
    let backupStarted = false;
    loading = true;
    let n = 0;
    const load = (async () => {
      while (loading) {
        const batch = Array.from({ length: 5 }, () => `r${n++}@queued.example`);
        const res = await call(first.api, 'POST', '/messages', {
          from: { email: 'app@example.com' },
          recipients: batch.map((email) => ({ email })),
          subject: 'Queued',
          text_content: 'Hi',
        });
        expect(res.status, JSON.stringify(res.body)).to.equal(202);
        acceptedAll.push(...batch);
        if (!backupStarted) acceptedBefore.push(...batch);
      }
    })();
    // Awaited below; marked handled so that a failure before then is not an unhandled rejection as well.
    load.catch(() => undefined);
    while (acceptedAll.length < 100) await new Promise((r) => setTimeout(r, 20));

    const target = join(dir, 'backup');
    backupStarted = true;
    const backup = await run(['--config', firstConfig, 'backup', target], dir);
    expect(backup.code, backup.stderr).to.equal(0);
    // Mail was still being accepted after the backup (a live daemon, not a stopped one).
    const atEnd = acceptedAll.length;
    while (acceptedAll.length < atEnd + 10) await new Promise((r) => setTimeout(r, 20));
    loading = false;
    await load;
    expect(backup.stdout).to.match(/^backup of \S+ from the running daemon written to /);
    const manifest = JSON.parse(readFileSync(join(target, 'postilion-backup.json'), 'utf8'));
    const keyFiles = manifest.files.map((f: { path: string }) => f.path);
    for (const file of ['secret-box.key', 'webhook-secrets.key', 'route-secrets.key', 'tracking.key', 'verp.key']) expect(keyFiles).to.include(file);
    expect(
      keyFiles.some((f: string) => /^dkim\/[0-9a-f-]+\/[^/]+\.pem$/.test(f)),
      keyFiles.join(', '),
    ).to.equal(true);
    expect(keyFiles).to.not.include('README.md');
    expect(statSync(join(target, 'keys', 'verp.key')).mode & 0o777).to.equal(0o600);
    expect(statSync(target).mode & 0o777).to.equal(0o700);

    // A backup never goes into a directory that holds something.
    const again = await run(['--config', firstConfig, 'backup', target], dir);
    expect(again.code).to.equal(2);
    expect(again.stderr).to.match(/^postilion: \S+ is not empty \(.*\): back up into a new or empty directory\n$/);

    first.child.signal('SIGTERM');
    expect(await first.child.exited).to.equal(0);

    // Restored elsewhere: other data and keys directories, another MX that accepts everything.
    const secondConfig = writeConfig('second', { tracked: restoredSink.port, queued: restoredSink.port }, true);
    mkdirSync(join(dir, 'second', 'keys'), { recursive: true });
    writeFileSync(join(dir, 'second', 'keys', 'README.md'), "the repository's README\n");
    const notBackup = await run(['--config', secondConfig, 'restore', dir], dir);
    expect(notBackup.code).to.equal(2);
    expect(notBackup.stderr).to.match(/^postilion: .* is not a Postilion backup: it has no postilion-backup\.json/);
    expect(existsSync(join(dir, 'second', 'data'))).to.equal(false);

    const restored = await run(['--config', secondConfig, 'restore', target], dir);
    expect(restored.code, restored.stderr).to.equal(0);
    expect(restored.stdout).to.match(/^restored the backup of \S+: \d+ records into .*second\/data, \d+ key files into .*second\/keys; start the daemon/);
    expect(readFileSync(join(dir, 'second', 'keys', 'verp.key'))).to.deep.equal(readFileSync(join(dir, 'first', 'keys', 'verp.key')));
    expect(readFileSync(join(dir, 'second', 'keys', 'tracking.key'))).to.deep.equal(readFileSync(join(dir, 'first', 'keys', 'tracking.key')));

    const second = await start(secondConfig);
    const inboundPort = Number((await second.child.waitFor(/"port":(\d+),"msg":"inbound SMTP listening"/))[1]);

    // Restore refuses a running daemon, then a data directory that is not empty.
    const running = await run(['--config', secondConfig, 'restore', target], dir);
    expect(running.code).to.equal(2);
    expect(running.stderr).to.match(/^postilion: a daemon is running on .*: stop it first/);

    // The queue it was given goes out: everything accepted before the backup began, maybe some
    // accepted while it ran, nothing twice, nothing never accepted.
    const deadline = Date.now() + 30_000;
    while (!acceptedBefore.every((r) => restoredSink.received.some((m) => m.to[0] === r))) {
      if (Date.now() > deadline) throw new Error(`the restored daemon delivered ${restoredSink.received.length} of at least ${acceptedBefore.length}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 500));
    const got = restoredSink.received.map((m) => m.to[0]!);
    expect(new Set(got).size, 'no message twice').to.equal(got.length);
    expect(
      got.every((r) => acceptedAll.includes(r)),
      'only mail that was accepted',
    ).to.equal(true);
    expect(got.length).to.be.at.most(atEnd);

    // The old link still redirects: the restored tracking.key verifies it.
    const click = await trackingGet(second.tracking, link, { 'user-agent': BROWSER });
    expect(click.status).to.equal(302);
    expect(click.headers.location).to.equal('https://shop.example.net/orders/7');

    // A late bounce to the old return path is taken: the restored verp.key verifies its token.
    const raw = readFileSync(join(FIXTURES, 'postfix.eml'), 'latin1').replaceAll(FIXTURE_TOKEN, returnPath).replaceAll(FIXTURE_MESSAGE_ID, trackedId);
    const { client } = await RawSmtp.open(inboundPort, { localAddress: '127.0.0.1' });
    try {
      await client.command('EHLO mx.example.org');
      await client.command('MAIL FROM:<>');
      expect((await client.command(`RCPT TO:<${returnPath}>`)).code).to.equal(250);
      await client.command('DATA');
      client.write(raw.endsWith('\r\n') ? raw : `${raw}\r\n`);
      expect((await client.command('.')).code).to.equal(250);
    } finally {
      client.close();
    }
    const bounceDeadline = Date.now() + 10_000;
    while ((await call(second.api, 'GET', `/messages/${encodeURIComponent(trackedId)}`)).body.status !== 'Bounced') {
      if (Date.now() > bounceDeadline) throw new Error('the late bounce did not bounce the message');
      await new Promise((r) => setTimeout(r, 100));
    }

    second.child.signal('SIGTERM');
    expect(await second.child.exited).to.equal(0);
    const nonEmpty = await run(['--config', secondConfig, 'restore', target], dir);
    expect(nonEmpty.code).to.equal(2);
    expect(nonEmpty.stderr).to.match(/^postilion: data\.dir \S+ is not empty \(.*\): restore only onto an empty data directory/);
    expect(readdirSync(join(dir, 'second', 'keys'))).to.include('README.md');
  });
});
