import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../../src/cli/main.ts';
import type { EngineDestination } from '../../../src/queue/engine.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startSink, type SmtpSink } from '../../helpers/smtp-sink.ts';

/**
 * Traffic shaping end to end: MX sinks on 127.0.0.x (one port, as MX hosts share port 25) found
 * through the loopback DNS server under the names of the providers' MX hosts, answering their
 * throttling replies. The throttled lane slows or is suspended; the other destinations are not.
 */
const POLLING = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };
const GMAIL_MX = 'gmail-smtp-in.l.google.com';
const MICROSOFT_MX = 'outlook-test.mail.protection.outlook.com';
const YAHOO_MX = 'mta5.am0.yahoodns.net';
const TSS04 = '421 4.7.0 [TSS04] Messages from 127.0.0.1 temporarily deferred due to unexpected volume or user complaints - 4.16.55.1';

interface Peers {
  port: number;
  plain: SmtpSink;
  gmail: SmtpSink;
  microsoft: SmtpSink;
  /** Greets with Yahoo's TSS04 deferral and hangs up. */
  yahoo: Server;
  yahooConnections: number;
  sockets: Socket[];
}

/** The sinks on 127.0.0.1 to .4, one port (another process may hold it on one of them: tried again). */
async function startPeers(): Promise<Peers> {
  for (let tries = 0; ; tries++) {
    const plain = await startSink({ host: '127.0.0.1' });
    const started: Array<{ close(): Promise<void> }> = [plain];
    try {
      const gmail = await startSink({ host: '127.0.0.2', port: plain.port });
      started.push(gmail);
      const microsoft = await startSink({ host: '127.0.0.3', port: plain.port });
      started.push(microsoft);
      const peers: Peers = { port: plain.port, plain, gmail, microsoft, yahoo: null as unknown as Server, yahooConnections: 0, sockets: [] };
      peers.yahoo = createServer((socket) => {
        peers.yahooConnections += 1;
        peers.sockets.push(socket);
        socket.on('error', () => undefined);
        socket.end(`${TSS04}\r\n`);
      });
      await new Promise<void>((resolve, reject) => {
        peers.yahoo.once('error', reject);
        peers.yahoo.listen(plain.port, '127.0.0.4', resolve);
      });
      return peers;
    } catch (err) {
      for (const s of started) await s.close();
      if (tries >= 4) throw err;
    }
  }
}

describe('traffic shaping: throttling replies slow or suspend their lane only', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  let peers: Peers;
  let logLines: string[];
  let configPath: string;
  const cleanUp: string[] = [];

  async function setUp(delivery: Record<string, unknown> = {}) {
    peers = await startPeers();
    logLines = [];
    bed = await startMessageBed({ ...POLLING, delivery: { enabled: true, mx_port: peers.port, ...delivery } }, undefined, { logLines });
    const zone = bed.dns.zone;
    const mx = (domain: string, host: string, address: string) => {
      zone.set(domain, 'MX', [{ exchange: host, priority: 10 }]);
      zone.set(host, 'A', [address]);
    };
    mx('example.org', 'mx1.example.org', '127.0.0.1');
    mx('gmail.test', GMAIL_MX, '127.0.0.2');
    mx('outlook.test', MICROSOFT_MX, '127.0.0.3');
    mx('yahoo.test', YAHOO_MX, '127.0.0.4');
    // A second domain on Google's MX: the same lane as gmail.test.
    zone.set('workspace.test', 'MX', [{ exchange: GMAIL_MX, priority: 10 }]);
    bed.clock.ms = Date.now();
    configPath = join(bed.server.dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(bed.server.dir, 'data')}\nkeys:\n  dir: ${join(bed.server.dir, 'keys')}\nlog:\n  level: silent\n`);
  }

  afterEach(async () => {
    await bed?.stop();
    for (const dir of cleanUp.splice(0)) rmSync(dir, { recursive: true, force: true });
    if (!peers) return;
    for (const socket of peers.sockets) socket.destroy();
    await Promise.all([peers.plain.close(), peers.gmail.close(), peers.microsoft.close(), new Promise((resolve) => peers.yahoo.close(resolve))]);
  });

  async function send(...recipients: string[]): Promise<string[]> {
    const res = await bed.send({ recipients: recipients.map((email) => ({ email })) });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.data.map((d: { id: string }) => d.id) as string[];
  }

  const lane = (name: string): EngineDestination | undefined => bed.server.daemon.parts.jobs.engine.destinations().find((d) => d.destination === name);

  async function queueStatus(): Promise<string> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, 'queue', 'status'], { out: (t) => (out += t), err: (t) => (err += t) });
    expect(code, err).to.equal(0);
    return out;
  }

  async function throttles(): Promise<string[]> {
    const text = await (await fetch(`${bed.server.daemon.parts.metrics.url}/metrics`)).text();
    return text.split('\n').filter((line) => line.startsWith('postilion_shaping_throttles_total{'));
  }

  it("slows Gmail's lane on 421 4.7.28 (one connection, 600 an hour) while example.org is delivered at full speed", async () => {
    await setUp();
    peers.gmail.rcpt = () => ({
      code: 421,
      text: '4.7.28 [127.0.0.1] Our system has detected an unusual rate of unsolicited mail originating from your IP address.',
    });
    const [g1, g2, e1, e2] = await send('a@gmail.test', 'b@workspace.test', 'c@example.org', 'd@example.org');
    await bed.until(g1!, 'Deferred');
    await bed.until(g2!, 'Deferred');
    await bed.until(e1!, 'Delivered');
    await bed.until(e2!, 'Delivered');

    const gmail = lane(GMAIL_MX)!;
    expect(gmail.concurrency).to.equal(1);
    expect(gmail.rate).to.be.closeTo(600 / 3600, 1e-9);
    expect(gmail.shaping?.provider).to.equal('gmail');
    expect(gmail.shaping?.throttle).to.include({ rule: 'unsolicited-rate', action: 'slow' });
    expect(gmail.shaping?.throttle?.reply).to.match(/^421 4\.7\.28 \[127\.0\.0\.1\] Our system has detected/);
    expect(lane('mx1.example.org')?.shaping ?? null).to.equal(null);

    // The lane is slowed, not stopped: once Gmail accepts again, the retries go one at a time
    // (a token per 6 s; this clock stands still, so one goes and the other waits for its token).
    peers.gmail.rcpt = () => null;
    bed.clock.advance(600_000);
    await bed.server.daemon.parts.jobs.engine.wake();
    await peers.gmail.waitFor(1);
    await new Promise((r) => setTimeout(r, 300));
    expect(peers.gmail.received).to.have.length(1);
    // example.org is not held by it.
    const [e3] = await send('e@example.org');
    await bed.until(e3!, 'Delivered');

    const status = await queueStatus();
    expect(status).to.match(new RegExp(`${GMAIL_MX.replace(/\./g, '\\.')}\\s.*slowed by gmail/unsolicited-rate until`));
    expect(status).to.match(/THROTTLED LANE\s+PROVIDER\s+RULE\s+ACTION\s+SINCE\s+REPLY/);
    expect(status).to.match(/gmail\s+unsolicited-rate\s+slow\s+\S+ ago\s+421 4\.7\.28 \[127\.0\.0\.1\] Our system/);
    expect(await throttles()).to.deep.equal(['postilion_shaping_throttles_total{provider="gmail",rule="unsolicited-rate",action="slow"} 1']);
    const logged = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'shaping: lane slowed after a throttling reply');
    expect(logged).to.have.length(1);
    expect(logged[0]).to.include({ lane: GMAIL_MX, provider: 'gmail', rule: 'unsolicited-rate', action: 'slow', account_id: bed.server.accountId });
    expect(logged[0]!.message_id).to.be.a('string');
    expect(logged[0]!.reply).to.match(/^421 4\.7\.28 /);
  });

  it("slows Microsoft's lane on 451 4.7.650 and suspends Yahoo's on 421 4.7.0 [TSS04]; nothing is sent on it until the suspension is over", async () => {
    await setUp();
    peers.microsoft.rcpt = () => ({
      code: 451,
      text: '4.7.650 The mail server [127.0.0.1] has been temporarily rate limited due to IP reputation. For e-mail delivery information, see https://aka.ms/postmaster (S775)',
    });
    const [m1, y1] = await send('a@outlook.test', 'b@yahoo.test');
    const deferred = await bed.until(y1!, 'Deferred');
    expect(deferred.delivery_attempts[0].log).to.contain('[TSS04]');
    await bed.until(m1!, 'Deferred');
    expect(lane(MICROSOFT_MX)?.shaping?.throttle).to.include({ rule: 'ip-reputation-rate', action: 'slow' });
    expect(lane(MICROSOFT_MX)?.concurrency).to.equal(1);

    const yahoo = lane(YAHOO_MX)!;
    expect(yahoo.shaping?.throttle).to.include({ rule: 'tss04-volume-or-complaints', action: 'suspend' });
    expect(yahoo.pausedUntil).to.equal(bed.clock.ms + 30 * 60_000);
    expect(peers.yahooConnections).to.equal(1);

    // New mail for Yahoo waits; example.org's goes.
    const [y2, e1] = await send('c@yahoo.test', 'd@example.org');
    await bed.until(e1!, 'Delivered');
    await new Promise((r) => setTimeout(r, 300));
    expect(peers.yahooConnections).to.equal(1);
    const waiting = await bed.read(y2!);
    expect(waiting.status).to.equal('Received');
    expect(waiting.num_attempts).to.equal(0);

    const status = await queueStatus();
    expect(status).to.match(/mta5\.am0\.yahoodns\.net\s.*suspended by yahoo\/tss04-volume-or-complaints until/);
    expect(status).to.match(/outlook-test\.mail\.protection\.outlook\.com\s.*slowed by microsoft\/ip-reputation-rate until/);
    expect(await throttles()).to.have.members([
      'postilion_shaping_throttles_total{provider="microsoft",rule="ip-reputation-rate",action="slow"} 1',
      'postilion_shaping_throttles_total{provider="yahoo",rule="tss04-volume-or-complaints",action="suspend"} 1',
    ]);

    // Once the suspension is over, the waiting message is tried again (on one connection, ramping back).
    bed.clock.advance(30 * 60_000 + 1000);
    await bed.server.daemon.parts.jobs.engine.wake();
    await bed.until(y2!, 'Deferred');
    expect(peers.yahooConnections).to.equal(2);
  });

  it("takes the operator's shaping file over the shipped one: Gmail's messages per connection and connections", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'postilion-shaping-'));
    cleanUp.push(dir);
    const path = join(dir, 'shaping.yaml');
    writeFileSync(path, 'version: 1\nproviders:\n  gmail: { connections: 1, messages_per_connection: 2 }\n');
    await setUp({ shaping_file: path });
    const ids = await send('a@gmail.test', 'b@gmail.test', 'c@gmail.test', 'd@gmail.test');
    for (const id of ids) await bed.until(id, 'Delivered');
    expect(peers.gmail.received).to.have.length(4);
    // One connection at a time, each closed after two messages.
    expect(peers.gmail.connections).to.equal(2);
    expect(lane(GMAIL_MX)?.concurrency ?? 1).to.equal(1);
  });

  it('leaves lanes as before with delivery.shaping off', async () => {
    await setUp({ shaping: false });
    peers.gmail.rcpt = () => ({ code: 421, text: '4.7.28 [127.0.0.1] Our system has detected an unusual rate of unsolicited mail.' });
    const [g1] = await send('a@gmail.test');
    await bed.until(g1!, 'Deferred');
    expect(lane(GMAIL_MX)?.shaping ?? null).to.equal(null);
    expect(await throttles()).to.deep.equal([]);
  });
});
