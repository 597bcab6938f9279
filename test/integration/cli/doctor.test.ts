import { expect } from 'chai';
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Packet } from 'dns2';
import { generate } from 'selfsigned';
import { main } from '../../../src/cli/main.ts';
import { loadConfig } from '../../../src/config/load.ts';
import type { Config } from '../../../src/config/schema.ts';
import { identityOf, openCore } from '../../../src/assemblies/core.ts';
import { Daemon } from '../../../src/daemon.ts';
import { expectedRecords, spfRecord } from '../../../src/domains/records.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import type { DomainRecord } from '../../../src/store/records.ts';
import { publishRecords, startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';

/**
 * `postilion doctor` through main(), on loopback only: a config with every listener on a free
 * 127.0.0.1 port, a domain whose records the test DNS server serves, certificates made here, and
 * a sending address in 127.0.0.0/8 whose PTR a small front answers (the test DNS server serves
 * no PTR; the front passes every other question on to it, over UDP and TCP).
 */

const HOSTNAME = 'mx.doctor.test';
const SENDING_IP = '127.0.0.7';
const DOMAIN = 'example.com';
const DAY = 86_400_000;

interface Line {
  status: string;
  reason: string;
}

interface Run {
  code: number;
  out: string;
  err: string;
  /** Check name → its line. */
  lines: Map<string, Line>;
}

/** Answers PTR questions itself; forwards every other question to the test DNS server. */
interface ReverseFront {
  address: string;
  /** Address → the names its PTR gives. */
  ptr: Map<string, string[]>;
  close(): Promise<void>;
}

async function startReverseFront(upstreamPort: number): Promise<ReverseFront> {
  const ptr = new Map<string, string[]>();
  const reverseName = (ip: string) => `${ip.split('.').reverse().join('.')}.in-addr.arpa`;
  const answerPtr = (request: Packet): Buffer | null => {
    const question = request.questions[0];
    if (!question || question.type !== Packet.TYPE.PTR) return null;
    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    const ip = [...ptr.keys()].find((a) => reverseName(a) === question.name.toLowerCase().replace(/\.$/, ''));
    if (ip === undefined) response.header.rcode = 3; // NXDOMAIN
    for (const name of ip === undefined ? [] : ptr.get(ip)!) {
      response.answers.push(Packet.createResourceFromQuestion(question, { name: question.name, ttl: 0, domain: name }));
    }
    return response.toBuffer();
  };
  const relays = new Set<UdpSocket>();
  const makeUdp = () => {
    const socket = createSocket('udp4', (message, peer) => {
      const own = answerPtr(Packet.parse(message));
      if (own) return void socket.send(own, peer.port, peer.address);
      const relay = createSocket('udp4');
      relays.add(relay);
      const done = () => {
        relays.delete(relay);
        relay.close();
      };
      relay.on('message', (reply) => {
        socket.send(reply, peer.port, peer.address);
        done();
      });
      relay.send(message, upstreamPort, '127.0.0.1');
      setTimeout(() => relays.has(relay) && done(), 2000).unref();
    });
    return socket;
  };
  // Answers too big for UDP come back truncated, and are asked again over TCP on the same port.
  const piped = new Set<Socket>();
  const tcp = createServer((client) => {
    const upstream = createConnection(upstreamPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      piped.add(s);
      s.on('close', () => piped.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  // A free UDP port may be taken for TCP (another test's connection): try again with another.
  let udp = makeUdp();
  let port = 0;
  for (let attempt = 1; ; attempt++) {
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
    port = udp.address().port;
    const listening = await new Promise<boolean>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' && attempt < 20 ? resolve(false) : reject(err));
      tcp.once('error', onError);
      tcp.listen(port, '127.0.0.1', () => {
        tcp.off('error', onError);
        resolve(true);
      });
    });
    if (listening) break;
    await new Promise<void>((r) => udp.close(() => r()));
    udp = makeUdp();
  }
  return {
    address: `127.0.0.1:${port}`,
    ptr,
    close: async () => {
      for (const relay of relays) relay.close();
      for (const s of piped) s.destroy();
      await Promise.all([new Promise<void>((r) => udp.close(() => r())), new Promise<void>((r) => tcp.close(() => r()))]);
    },
  };
}

/** Free loopback ports, found by binding port 0 (all at once, so they differ). */
async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Server>((resolve) => {
          const s = createServer();
          s.listen(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  return ports;
}

/** A certificate and key for `hostname` in <keys>/tls/<name>.crt|.key, valid over [from, to]. */
async function writeCertificate(keysDir: string, name: string, from: number, to: number): Promise<void> {
  const pems = await generate([{ name: 'commonName', value: HOSTNAME }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(from),
    notAfterDate: new Date(to),
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: HOSTNAME }] }],
  });
  mkdirSync(join(keysDir, 'tls'), { recursive: true });
  writeFileSync(join(keysDir, 'tls', `${name}.crt`), pems.cert);
  writeFileSync(join(keysDir, 'tls', `${name}.key`), pems.private, { mode: 0o600 });
}

function parseLines(out: string): Map<string, Line> {
  const lines = new Map<string, Line>();
  for (const line of out.split('\n')) {
    const m = /^(OK|WARN|FAIL) +(.+?): (.*)$/.exec(line);
    if (m) lines.set(m[2]!, { status: m[1]!, reason: m[3]! });
  }
  return lines;
}

describe('postilion doctor (CLI)', function () {
  this.timeout(20_000);
  let dir: string;
  let dns: TestDnsServer;
  let front: ReverseFront;
  let configPath: string;
  let config: Config;
  let domain: DomainRecord;
  let selector: string;
  let ports: { api: number; apiTls: number; starttls: number; tls: number; metrics: number; inbound: number; tracking: number };
  const closers: Array<() => Promise<void>> = [];

  async function doctor(...args: string[]): Promise<Run> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, 'doctor', ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err, lines: parseLines(out) };
  }

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-doctor-'));
    dns = await startDnsServer();
    front = await startReverseFront(dns.port);
    const [api, apiTls, starttls, tls, metrics, inbound, tracking] = await freePorts(7);
    ports = { api: api!, apiTls: apiTls!, starttls: starttls!, tls: tls!, metrics: metrics!, inbound: inbound!, tracking: tracking! };
    configPath = join(dir, 'postilion.yaml');
    writeFileSync(
      configPath,
      [
        'server:',
        `  hostname: ${HOSTNAME}`,
        `  sending_ips: [${SENDING_IP}]`,
        'dns:',
        `  servers: ["${front.address}"]`,
        '  timeout_ms: 500',
        '  tries: 1',
        'data:',
        `  dir: ${join(dir, 'data')}`,
        'keys:',
        `  dir: ${join(dir, 'keys')}`,
        'log:',
        '  level: silent',
        'delivery:',
        '  enabled: false',
        'api:',
        '  host: 127.0.0.1',
        `  port: ${ports.api}`,
        '  tls:',
        '    enabled: true',
        '    host: 127.0.0.1',
        `    port: ${ports.apiTls}`,
        'smtp:',
        '  submission:',
        '    host: 127.0.0.1',
        `    starttls_port: ${ports.starttls}`,
        `    tls_port: ${ports.tls}`,
        '  inbound:',
        '    host: 127.0.0.1',
        `    port: ${ports.inbound}`,
        'tracking:',
        '  host: 127.0.0.1',
        `  port: ${ports.tracking}`,
        'metrics:',
        '  host: 127.0.0.1',
        `  port: ${ports.metrics}`,
        '',
      ].join('\n'),
    );
    config = loadConfig({ path: configPath, env: {} }).config;
    const now = Date.now();
    await writeCertificate(config.keys.dir, 'smtp', now - DAY, now + 90 * DAY);
    await writeCertificate(config.keys.dir, 'api', now - DAY, now + 90 * DAY);

    // A domain, made the way `domains add` makes it, with every record it asks for served.
    const core = await openCore(config);
    try {
      const account = await core.accounts.create({ name: 'Doctor', website: 'https://doctor.test', ownerEmail: 'owner@doctor.test' });
      domain = await core.domains.create(account.id, { name: DOMAIN });
    } finally {
      await core.store.close();
    }
    selector = domain.dkim.active.keys[0]!.selector;
    publishRecords(dns.zone, expectedRecords(domain, identityOf(config)));
    dns.zone.set(HOSTNAME, 'A', [SENDING_IP]);
    front.ptr.set(SENDING_IP, [HOSTNAME]);
  });

  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await front.close();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes a good set-up: every line OK and exit 0, as text and as JSON', async () => {
    const run = await doctor();
    expect(run.code, run.out + run.err).to.equal(0);
    const names = [...run.lines.keys()];
    expect(names).to.deep.equal([
      'config',
      'daemon',
      'listener smtp-starttls',
      'listener smtp-tls',
      'listener inbound',
      'listener api',
      'listener api-tls',
      'listener tracking',
      'listener metrics',
      'listener control',
      'storage data',
      'storage keys',
      'tls smtp-submission',
      'tls api',
      'dashboard',
      `ptr ${SENDING_IP}`,
      `dns ${DOMAIN} spf`,
      `dns ${DOMAIN} dmarc`,
      `dns ${DOMAIN} return_path`,
      `dns ${DOMAIN} tracking`,
      `dns ${DOMAIN} mx`,
      `dkim ${DOMAIN} ${selector}`,
    ]);
    // Every line of the output is a check, but the closing count.
    expect(
      run.out
        .trim()
        .split('\n')
        .filter((l) => l !== ''),
    ).to.have.length(names.length + 1);
    for (const [name, line] of run.lines) expect(line.status, `${name}: ${line.reason}`).to.equal('OK');
    expect(run.lines.get('listener api')!.reason).to.equal(`127.0.0.1:${ports.api} can be bound`);
    expect(run.lines.get(`ptr ${SENDING_IP}`)!.reason)
      .to.contain(`PTR ${HOSTNAME}, which resolves back to ${SENDING_IP}`)
      .and.contain(front.address);
    expect(run.lines.get(`dkim ${DOMAIN} ${selector}`)!.reason).to.contain(`${selector}._domainkey.${DOMAIN}`);
    expect(run.out).to.match(/\n22 OK, 0 WARN, 0 FAIL\n$/);

    const json = await doctor('--json');
    expect(json.code).to.equal(0);
    const parsed = JSON.parse(json.out) as { status: string; checks: Array<{ check: string; status: string; reason: string }> };
    expect(parsed.status).to.equal('OK');
    expect(parsed.checks.map((c) => c.check)).to.deep.equal(names);
    expect(parsed.checks.every((c) => c.status === 'OK')).to.equal(true);
  });

  it("checks each delivery source: reverse DNS forward-confirmed to its EHLO name, its address in the SPF record; a domain's SPF names the source it misses", async () => {
    const sources =
      '  enabled: false\n  sources:\n    a: { address: 127.0.0.2, ehlo: a.mta.example.com }\n    b: { address: 127.0.0.3, ehlo: b.mta.example.com }';
    writeFileSync(configPath, readFileSync(configPath, 'utf8').replace('  enabled: false', sources));
    config = loadConfig({ path: configPath, env: {} }).config;
    // The records domains add prints now: the SPF record names the sources too.
    dns.zone.set(DOMAIN, 'TXT', [spfRecord(identityOf(config))]);
    dns.zone.set('a.mta.example.com', 'A', ['127.0.0.2']);
    front.ptr.set('127.0.0.2', ['a.mta.example.com']);
    dns.zone.set('b.mta.example.com', 'A', ['127.0.0.9']);
    front.ptr.set('127.0.0.3', ['b.mta.example.com']);
    let run = await doctor();
    expect(run.lines.get('source a')).to.deep.equal({
      status: 'OK',
      reason: `PTR a.mta.example.com, which resolves back to 127.0.0.2 (asked dns.servers ${front.address}); in the SPF record domains add prints`,
    });
    expect(run.lines.get('source b')!.status).to.equal('FAIL');
    expect(run.lines.get('source b')!.reason).to.contain('b.mta.example.com resolves to 127.0.0.9, not 127.0.0.3: the reverse DNS is not forward-confirmed');
    expect(run.lines.get(`dns ${DOMAIN} spf`)!.status).to.equal('OK');
    // The domain's published SPF lacks source b's address: named.
    dns.zone.set(DOMAIN, 'TXT', [`v=spf1 ip4:${SENDING_IP} ip4:127.0.0.2 ~all`]);
    run = await doctor();
    expect(run.lines.get(`dns ${DOMAIN} spf`)!.status).to.equal('FAIL');
    expect(run.lines.get(`dns ${DOMAIN} spf`)!.reason).to.contain('does not authorise this server (127.0.0.3)');
  });

  it('names each failure of a broken set-up and exits 1', async () => {
    // The DKIM record publishes another key than the one on disk.
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const otherKey = (createPublicKey(privateKey).export({ type: 'spki', format: 'der' }) as Buffer).toString('base64');
    dns.zone.set(`${selector}._domainkey.${DOMAIN}`, 'TXT', [`v=DKIM1; k=rsa; p=${otherKey}`]);
    // No DMARC record.
    dns.zone.delete(`_dmarc.${DOMAIN}`);
    // The return path's name is answered SERVFAIL: an optional record, so a warning.
    dns.failingNames.add(`${domain.returnPathSubdomain}.${DOMAIN}`);
    // A foreign process holds the API port (no daemon answers on the control socket).
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(ports.api, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((r) => squatter.close(() => r())));
    // The API certificate expired yesterday; the SMTP one expires within 14 days.
    const now = Date.now();
    await writeCertificate(config.keys.dir, 'api', now - 90 * DAY, now - DAY);
    await writeCertificate(config.keys.dir, 'smtp', now - 90 * DAY, now + 5 * DAY);
    // The PTR of the sending address names another host.
    front.ptr.set(SENDING_IP, ['other.example.net']);

    const run = await doctor();
    expect(run.code, run.out + run.err).to.equal(1);
    const line = (name: string) => {
      expect(run.lines.has(name), `${name} in\n${run.out}`).to.equal(true);
      return run.lines.get(name)!;
    };
    expect(line(`dkim ${DOMAIN} ${selector}`)).to.deep.include({ status: 'FAIL' });
    expect(line(`dkim ${DOMAIN} ${selector}`).reason)
      .to.contain(`TXT ${selector}._domainkey.${DOMAIN} does not publish the key on disk`)
      .and.contain(otherKey.slice(-16));
    expect(line(`dns ${DOMAIN} dmarc`)).to.deep.equal({
      status: 'FAIL',
      reason: `DMARC: no DMARC record at _dmarc.${DOMAIN}: publish TXT "${config.domains.dmarc_record}" (asked dns.servers ${front.address})`,
    });
    expect(line('listener api').status).to.equal('FAIL');
    expect(line('listener api').reason).to.contain(`127.0.0.1:${ports.api} is in use by another process`);
    expect(line('tls api').status).to.equal('FAIL');
    expect(line('tls api').reason).to.match(/api\.crt expired on \d{4}-\d\d-\d\dT/);
    expect(line(`ptr ${SENDING_IP}`)).to.deep.equal({
      status: 'FAIL',
      reason: `the PTR of ${SENDING_IP} names other.example.net, not server.hostname ${HOSTNAME} (asked dns.servers ${front.address})`,
    });
    // Warnings name what to look at but do not fail the run.
    expect(line('tls smtp-submission').status).to.equal('WARN');
    expect(line('tls smtp-submission').reason).to.match(/smtp\.crt expires on .*, in [45] days: renew it/);
    expect(line(`dns ${DOMAIN} return_path`).status).to.equal('WARN');
    expect(line(`dns ${DOMAIN} return_path`).reason).to.equal(
      `CNAME ${domain.returnPathSubdomain}.${DOMAIN}: DNS lookup failed: ESERVFAIL (asked dns.servers ${front.address})`,
    );
    // What is still right stays OK.
    for (const name of ['config', 'daemon', 'listener smtp-starttls', 'listener api-tls', 'listener metrics', `dns ${DOMAIN} spf`, `dns ${DOMAIN} tracking`]) {
      expect(line(name).status, `${name}: ${line(name).reason}`).to.equal('OK');
    }
    const failed = [...run.lines].filter(([, l]) => l.status === 'FAIL').map(([name]) => name);
    expect(failed).to.have.members([`dkim ${DOMAIN} ${selector}`, `dns ${DOMAIN} dmarc`, 'listener api', 'tls api', `ptr ${SENDING_IP}`]);
  });

  it('names a busy inbound port and a busy tracking port of a stopped daemon, each with its option', async () => {
    // Another MTA on the inbound port (a distribution's Postfix on 25), another server on the tracking port.
    for (const port of [ports.inbound, ports.tracking]) {
      const squatter = createServer();
      await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
      closers.push(() => new Promise<void>((r) => squatter.close(() => r())));
    }
    const run = await doctor();
    expect(run.code, run.out + run.err).to.equal(1);
    expect(run.lines.get('daemon')!.reason).to.match(/^not running/);
    expect(run.lines.get('listener inbound')).to.deep.equal({
      status: 'FAIL',
      reason: `127.0.0.1:${ports.inbound} is in use by another process (no Postilion daemon answers on the control socket): the daemon could not start (smtp.inbound.port)`,
    });
    expect(run.lines.get('listener tracking')).to.deep.equal({
      status: 'FAIL',
      reason: `127.0.0.1:${ports.tracking} is in use by another process (no Postilion daemon answers on the control socket): the daemon could not start (tracking.port)`,
    });
    const failed = [...run.lines].filter(([, l]) => l.status === 'FAIL').map(([name]) => name);
    expect(failed).to.have.members(['listener inbound', 'listener tracking']);
  });

  it("checks a running daemon: the listeners it holds, the certificates, and each domain's DNS records and DKIM keys read through its control socket", async () => {
    const daemon = await Daemon.start({ config, log: createLogger('silent'), announce: () => undefined });
    closers.push(() => daemon.stop());
    const run = await doctor();
    expect(run.code, run.out + run.err).to.equal(0);
    expect(run.lines.get('daemon')!.status).to.equal('OK');
    expect(run.lines.get('daemon')!.reason).to.match(/^running: it answers on .*control\.sock/);
    for (const name of ['smtp-starttls', 'smtp-tls', 'inbound', 'api', 'api-tls', 'tracking', 'metrics']) {
      expect(run.lines.get(`listener ${name}`), name).to.deep.include({ status: 'OK' });
      expect(run.lines.get(`listener ${name}`)!.reason).to.match(/^127\.0\.0\.1:\d+ is in use by the running daemon$/);
    }
    expect(run.lines.get('listener inbound')!.reason).to.equal(`127.0.0.1:${ports.inbound} is in use by the running daemon`);
    expect(run.lines.get('listener control')!.reason).to.match(/control\.sock: the running daemon answers on it$/);
    expect(run.lines.has('domains'), run.out).to.equal(false);
    for (const name of [
      'storage data',
      'storage keys',
      'tls smtp-submission',
      'tls api',
      'dashboard',
      `dns ${DOMAIN} spf`,
      `dns ${DOMAIN} dmarc`,
      `dns ${DOMAIN} mx`,
      `dkim ${DOMAIN} ${selector}`,
    ]) {
      expect(run.lines.get(name), `${name} in\n${run.out}`).to.deep.include({ status: 'OK' });
    }
    expect(run.lines.get('tls api served')).to.deep.equal({
      status: 'OK',
      reason: `the running daemon serves ${join(config.keys.dir, 'tls', 'api.crt')} on 127.0.0.1:${ports.apiTls}`,
    });
    expect(run.lines.get('tls smtp-submission served')!.status).to.equal('OK');
    expect(run.out).to.match(/\n24 OK, 0 WARN, 0 FAIL\n$/);

    // The checks are made now, on what the daemon holds now: a record taken away and a domain
    // added while it runs are both found.
    dns.zone.delete(`_dmarc.${DOMAIN}`);
    await daemon.core.domains.create(domain.accountId, { name: 'late.example' });
    const broken = await doctor();
    expect(broken.code, broken.out).to.equal(1);
    expect(broken.lines.get(`dns ${DOMAIN} dmarc`)!.status).to.equal('FAIL');
    expect(broken.lines.get('dns late.example spf')!.status).to.equal('FAIL');
    expect([...broken.lines.keys()].filter((n) => n.startsWith('dkim late.example '))).to.have.length(1);
  });

  it('warns when a running daemon serves another certificate than the file (renewed, not reloaded), until it is reloaded', async () => {
    const daemon = await Daemon.start({ config, log: createLogger('silent'), announce: () => undefined });
    closers.push(() => daemon.stop());
    const now = Date.now();
    await writeCertificate(config.keys.dir, 'api', now - DAY, now + 180 * DAY);
    const run = await doctor();
    expect(run.code, run.out + run.err).to.equal(0);
    expect(run.lines.get('tls api')!.status).to.equal('OK');
    expect(run.lines.get('tls api served')!.status).to.equal('WARN');
    expect(run.lines.get('tls api served')!.reason).to.match(
      new RegExp(
        `^the running daemon serves on 127\\.0\\.0\\.1:${ports.apiTls} another certificate than .*api\\.crt \\(one valid until \\d{4}-.*\\): reload it \\(SIGHUP\\) or restart it`,
      ),
    );
    daemon.reload(config);
    const reloaded = await doctor();
    expect(reloaded.lines.get('tls api served')!.status).to.equal('OK');
  });

  it("against a running daemon, fails a configured address that another process holds instead of taking it for the daemon's", async () => {
    const daemon = await Daemon.start({ config, log: createLogger('silent'), announce: () => undefined });
    closers.push(() => daemon.stop());
    // The configuration was edited after the daemon started: inbound on a port Postfix holds, tracking on a free one.
    const [postfix, freeTracking] = await freePorts(2);
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(postfix, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((r) => squatter.close(() => r())));
    const edited = readFileSync(configPath, 'utf8')
      .replace(`    port: ${ports.inbound}\n`, `    port: ${postfix}\n`)
      .replace(`  port: ${ports.tracking}\n`, `  port: ${freeTracking}\n`);
    writeFileSync(configPath, edited);

    const run = await doctor();
    expect(run.code, run.out + run.err).to.equal(1);
    expect(run.lines.get('listener inbound')).to.deep.equal({
      status: 'FAIL',
      reason: `127.0.0.1:${postfix} is in use by another process, not by the running daemon (the running daemon listens on 127.0.0.1:${ports.inbound}): a restart with this configuration fails (smtp.inbound.port)`,
    });
    expect(run.lines.get('listener tracking')).to.deep.equal({
      status: 'WARN',
      reason: `the running daemon listens on 127.0.0.1:${ports.tracking}, not 127.0.0.1:${freeTracking} (tracking.port): restart it to apply this configuration; 127.0.0.1:${freeTracking} can be bound`,
    });
    expect(run.lines.get('listener api')!.status).to.equal('OK');
  });

  it('fails a control socket path taken by something that is not a socket, or too long for one', async () => {
    writeFileSync(join(config.data.dir, 'control.sock'), 'not a socket');
    const run = await doctor();
    expect(run.code, run.out + run.err).to.equal(1);
    expect(run.lines.get('listener control')).to.deep.equal({
      status: 'FAIL',
      reason: `${join(config.data.dir, 'control.sock')} exists and is not a socket: the daemon could not start (move it away)`,
    });

    const deep = join(dir, 'd'.repeat(120));
    writeFileSync(configPath, readFileSync(configPath, 'utf8').replace(`  dir: ${join(dir, 'data')}\n`, `  dir: ${deep}\n`));
    const long = await doctor();
    expect(long.lines.get('listener control')!.status).to.equal('FAIL');
    expect(long.lines.get('listener control')!.reason).to.contain('longer than the 107 a Unix socket path may be: use a shorter data.dir');
  });

  it("checks the tracking listener's certificate when it serves TLS, and the SMTP one for inbound alone", async () => {
    writeFileSync(
      configPath,
      readFileSync(configPath, 'utf8')
        .replace(`  port: ${ports.tracking}\n`, `  port: ${ports.tracking}\n  tls:\n    enabled: true\n`)
        .replace('  submission:\n', '  submission:\n    enabled: false\n'),
    );
    const run = await doctor();
    expect(run.code, run.out + run.err).to.equal(1);
    expect(run.lines.get('tls tracking')).to.deep.equal({
      status: 'FAIL',
      reason: `${join(config.keys.dir, 'tls', 'tracking.crt')} does not exist: the daemon cannot start with TLS on`,
    });
    expect(run.lines.get('tls smtp-submission')!.status).to.equal('OK');
    expect(run.lines.has('listener smtp-tls')).to.equal(false);
  });

  it('exits 2 naming the problem when the configuration does not load', async () => {
    writeFileSync(configPath, 'api:\n  prot: 8080\n');
    const run = await doctor();
    expect(run.code).to.equal(2);
    expect([...run.lines.keys()]).to.deep.equal(['config']);
    expect(run.lines.get('config')!.status).to.equal('FAIL');
    expect(run.lines.get('config')!.reason).to.contain('unknown option api.prot');

    rmSync(configPath);
    const json = await doctor('--json');
    expect(json.code).to.equal(2);
    expect(JSON.parse(json.out)).to.deep.equal({
      status: 'FAIL',
      checks: [{ check: 'config', status: 'FAIL', reason: `config file ${configPath} does not exist` }],
    });
  });
});
