import { expect } from 'chai';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTransport } from 'nodemailer';
import { parse, stringify } from 'yaml';
import { openClusterDb } from '../../src/cluster/database.ts';
import { validateConfig } from '../../src/config/load.ts';
import { Child, run } from '../helpers/child.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startPostgres, type PostgresServer } from '../helpers/postgres.ts';
import { startSink, type Received, type SmtpSink } from '../helpers/smtp-sink.ts';

/**
 * Three nodes and one PostgreSQL on loopback, each node a `postilion start` child process
 * configured as the README's "Several nodes (cluster mode)" says (its node1.yaml, with free
 * ports and temp dirs), all delivering to one SMTP sink through a smarthost. What one node does
 * to the shared state the others honour; what a node acknowledged survives its kill -9.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HEADING = '## Several nodes (cluster mode)';
const DOMAIN = 'example.com';
const SENDER = `app@${DOMAIN}`;

/** The node configuration the README shows (its first YAML block under HEADING), parsed. */
export function readmeNodeConfig(readme: string): Record<string, unknown> {
  const at = readme.indexOf(HEADING);
  const block = /```yaml\n([\s\S]*?)```/.exec(readme.slice(at));
  if (at < 0 || !block) throw new Error(`README.md has no YAML block under "${HEADING}"`);
  return parse(block[1]!) as Record<string, unknown>;
}

type Tree = Record<string, unknown>;
const isTree = (v: unknown): v is Tree => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `over` laid onto `base`, section by section. */
function merged(base: Tree, over: Tree): Tree {
  const out: Tree = { ...base };
  for (const [key, value] of Object.entries(over)) out[key] = isTree(value) && isTree(out[key]) ? merged(out[key], value) : value;
  return out;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until<T>(probe: () => T | Promise<T>, what: string, ms = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(50);
  }
}

interface ApiReply {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes, read loosely
  body: any;
  headers: Headers;
}

/** One running node: its process and where it listens. */
interface RunningNode {
  n: number;
  child: Child;
  api: string;
  submission: number;
}

describe('e2e: three nodes on one PostgreSQL (cluster mode)', function () {
  this.timeout(180_000);
  let postgres: PostgresServer;
  let dns: TestDnsServer;
  let sink: SmtpSink;
  let dir: string;
  let account: string;
  let adminKey: string;
  const nodes = new Map<number, RunningNode>();
  const children: Child[] = [];
  /** Replies the sink holds (released at the kill, or at cleanup). */
  const releases: Array<() => void> = [];

  const configPath = (n: number) => join(dir, `node${n}.yaml`);

  /** The README's node1.yaml for node `n`: its own dirs and node_id, ports the kernel picks, delivery to the sink. */
  function writeNodeConfig(n: number, databaseUrlFile: string): void {
    const readme = readmeNodeConfig(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    expect(readme.cluster, 'the README configures the cluster section').to.include.keys('database_url_file', 'node_id', 'key_file');
    const config = merged(readme, {
      server: { hostname: `node${n}.postilion.test` },
      data: { dir: join(dir, `node${n}`, 'data') },
      keys: { dir: join(dir, `node${n}`, 'keys') },
      // Loaded below with many requests a second from one client.
      api: { port: 0, rate_limits: { general: { per_second: 100_000, burst: 100_000 } } },
      smtp: { submission: { starttls_port: 0, tls_port: null }, inbound: { port: 0 } },
      tracking: { port: 0 },
      metrics: { port: 0 },
      dns: { servers: [dns.address], timeout_ms: 500, tries: 1 },
      delivery: { smarthost: { host: '127.0.0.1', port: sink.port, tls: 'off' }, concurrency: 4, per_destination: 4 },
      shutdown: { grace_seconds: 2 },
      cluster: { database_url_file: databaseUrlFile, node_id: `node${n}`, key_file: join(dir, 'cluster.key') },
    });
    validateConfig(config, configPath(n));
    mkdirSync(join(dir, `node${n}`), { recursive: true });
    writeFileSync(configPath(n), stringify(config));
  }

  async function startNode(n: number): Promise<RunningNode> {
    const child = new Child(['--config', configPath(n), 'start'], dir);
    children.push(child);
    const api = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/, 60_000))[1]!;
    const submission = Number((await child.waitFor(/"ports":\[\{"port":(\d+),"tls":"starttls"\}\],"msg":"SMTP submission listening"/))[1]);
    await child.waitFor(/"msg":"delivery started"/);
    const node = { n, child, api, submission };
    nodes.set(n, node);
    return node;
  }

  const node = (n: number): RunningNode => nodes.get(n)!;

  async function call(n: number, method: string, path: string, body?: unknown, headers: Record<string, string> = {}, key = adminKey): Promise<ApiReply> {
    const res = await fetch(`${node(n).api}/v2/accounts/${account}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
  }

  const message = (recipients: string[], subject = 'Cluster test') => ({
    from: { email: SENDER, name: 'App' },
    recipients: recipients.map((email) => ({ email })),
    subject,
    text_content: 'Hello from the cluster test.',
  });

  /** Sends through node `n`'s API; resolves with the Message-IDs of the 202. */
  async function send(n: number, recipients: string[], subject?: string): Promise<string[]> {
    const res = await call(n, 'POST', '/messages', message(recipients, subject));
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return (res.body.data as Array<{ id: string }>).map((d) => d.id);
  }

  /** Polls node `n`'s read API until the message has `status`. */
  async function untilStatus(n: number, id: string, status: string): Promise<void> {
    let last: unknown;
    await until(async () => {
      const res = await call(n, 'GET', `/messages/${encodeURIComponent(id)}`);
      last = res.body;
      return res.status === 200 && res.body.status === status;
    }, `${id} ${status} on node ${n}`).catch((err: Error) => {
      throw new Error(`${err.message}; last read: ${JSON.stringify(last)}`);
    });
  }

  const copiesTo = (address: string): Received[] => sink.received.filter((r) => r.to.includes(address));

  before(async () => {
    postgres = await startPostgres();
    dns = await startDnsServer();
    sink = await startSink();
    dir = mkdtempSync(join(tmpdir(), 'postilion-e2e-cluster-'));
    // The README's database-url file, mode 0600.
    const urlFile = join(dir, 'database-url');
    writeFileSync(urlFile, `${await postgres.createDatabase()}\n`, { mode: 0o600 });
    for (const n of [1, 2, 3]) writeNodeConfig(n, urlFile);

    // The README's `postilion cluster init`: the key file, and the schema. That command comes with
    // the cluster-nodes branch; until then the test makes the key as it does.
    const db = await openClusterDb(validateConfig(parse(readFileSync(configPath(1), 'utf8')), configPath(1)), { createKey: true });
    await db.close();
    // The README's `postilion init`: the cluster's first account, in the database.
    const init = await run(['--config', configPath(1), 'init'], dir);
    expect(init.code, init.stderr).to.equal(0);
    account = /account id: ([0-9a-f-]{36})/.exec(init.stdout)![1]!;
    adminKey = /aha-sk-[A-Za-z0-9]{64}/.exec(init.stdout)![0];

    await startNode(1);
    await Promise.all([startNode(2), startNode(3)]);

    // The sending domain, made on node 1; its DNS cannot be published here, so it is verified by hand.
    const domain = await call(1, 'POST', '/domains', { domain: DOMAIN });
    expect(domain.status, JSON.stringify(domain.body)).to.equal(201);
    const verified = await run(['--config', configPath(1), 'domains', 'verify', DOMAIN], dir);
    expect(verified.code, verified.stderr).to.equal(0);
  });

  after(async () => {
    for (const release of releases.splice(0)) release();
    for (const child of children) await child.kill();
    await sink?.close();
    await dns?.close();
    await postgres?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('starts the nodes from the README: the first account is made once, no node but the first prints a key', () => {
    for (const n of [1, 2, 3]) expect(node(n).child.stdout, `node ${n}`).not.to.match(/aha-sk-/);
    for (const n of [2, 3]) expect(node(n).child.stdout, `node ${n}`).not.to.contain('bootstrap account and admin key created');
  });

  it('a key made on node 1 authenticates on nodes 2 and 3', async () => {
    const made = await call(1, 'POST', '/api-keys', { label: 'made on node 1', scopes: ['api-keys:read', 'messages:send:all'] });
    expect(made.status, JSON.stringify(made.body)).to.equal(201);
    const key = made.body.secret_key as string;
    for (const n of [2, 3]) {
      const res = await call(n, 'GET', '/api-keys', undefined, {}, key);
      expect(res.status, `node ${n}: ${JSON.stringify(res.body)}`).to.equal(200);
      expect((res.body.data as Array<{ id: string }>).map((k) => k.id)).to.include(made.body.id);
    }
    // It sends through node 3 too (the domain, made on node 1, is known there).
    const sent = await call(3, 'POST', '/messages', message(['key-check@example.org']), {}, key);
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    await until(() => copiesTo('key-check@example.org').length === 1, 'the message sent with the new key');
    // A key nobody made is refused everywhere: the 200s above are not a node letting anything in.
    expect((await call(2, 'GET', '/api-keys', undefined, {}, `aha-sk-${'x'.repeat(64)}`)).status).to.equal(401);
  });

  it('a suppression added on node 3 stops a send on node 1', async () => {
    const address = 'suppressed@example.org';
    // Delivered first: node 1 has looked the address up, and found no suppression.
    const [before] = await send(1, [address], 'before the suppression');
    await untilStatus(1, before!, 'Delivered');
    expect(copiesTo(address)).to.have.length(1);

    const added = await call(3, 'POST', '/suppressions', {
      email: address,
      domain: DOMAIN,
      reason: 'asked on node 3',
      expires_at: new Date(Date.now() + 365 * 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z'),
    });
    expect(added.status, JSON.stringify(added.body)).to.equal(201);
    // Every node honours it within a second (issue: LISTEN/NOTIFY).
    await sleep(1000);
    const [suppressed, control] = await send(1, [address, 'not-suppressed@example.org'], 'after the suppression');
    await untilStatus(1, suppressed!, 'Suppressed');
    await untilStatus(1, control!, 'Delivered');
    const read = await call(1, 'GET', `/messages/${encodeURIComponent(suppressed!)}`);
    expect(read.body.delivery_attempts.at(-1).status).to.equal('Suppressed');
    expect(copiesTo(address), 'copies to the suppressed address').to.have.length(1);
  });

  it('an idempotent retry on another node replays the answer; another body with the same key is refused', async () => {
    const key = { 'idempotency-key': 'cluster-retry-1' };
    const body = message(['idempotent@example.org'], 'sent once');
    const first = await call(1, 'POST', '/messages', body, key);
    expect(first.status, JSON.stringify(first.body)).to.equal(202);

    const retried = await call(2, 'POST', '/messages', body, key);
    expect(retried.status).to.equal(202);
    expect(retried.body).to.deep.equal(first.body);
    expect(retried.headers.get('idempotent-replayed')).to.equal('true');

    const other = await call(3, 'POST', '/messages', message(['idempotent@example.org'], 'another body'), key);
    expect(other.status, JSON.stringify(other.body)).to.equal(422);
    expect(other.body.message).to.equal('idempotency key was already used with a different request payload');

    await untilStatus(1, first.body.data[0].id, 'Delivered');
    await sleep(500);
    expect(copiesTo('idempotent@example.org'), 'one message, one delivery').to.have.length(1);
  });

  it('delivers DKIM-signed mail submitted over SMTP and the API to nodes 1 and 2', async () => {
    // The credential is made on node 3 and used on nodes 1 and 2.
    const credential = await call(3, 'POST', '/smtp-credentials', { name: 'cluster app', scope: 'scoped', domains: [DOMAIN] });
    expect(credential.status, JSON.stringify(credential.body)).to.equal(201);
    const { username, password } = credential.body as { username: string; password: string };
    for (const n of [1, 2]) {
      // AUTH without TLS: the client is on loopback (smtp.submission.plain_auth_from).
      const transport = createTransport({
        host: '127.0.0.1',
        port: node(n).submission,
        secure: false,
        ignoreTLS: true,
        auth: { user: username, pass: password },
      });
      try {
        const info = await transport.sendMail({ from: SENDER, to: `smtp${n}@example.org`, subject: `over SMTP to node ${n}`, text: `Hello, node ${n}.` });
        expect(info.response).to.match(/^250 2\.0\.0 /);
      } finally {
        transport.close();
      }
      await send(n, [`api${n}@example.org`], `over the API to node ${n}`);
    }
    const addresses = ['smtp1', 'api1', 'smtp2', 'api2'].map((local) => `${local}@example.org`);
    await until(() => addresses.every((a) => copiesTo(a).length === 1), 'the four messages at the sink');

    // The signatures verify against the DKIM record the API shows for the domain (read on node 3).
    const domain = await call(3, 'GET', `/domains/${DOMAIN}`);
    expect(domain.status).to.equal(200);
    const records = domain.body.dns_records as Array<{ type: string; host: string; content: string }>;
    const resolver = async (name: string, type: string): Promise<string[][]> => {
      const found = records.filter((r) => r.type === type && r.host === name).map((r) => [r.content]);
      if (found.length === 0) throw Object.assign(new Error(`no ${type} for ${name}`), { code: 'ENOTFOUND' });
      return found;
    };
    for (const address of addresses) {
      const [got] = copiesTo(address);
      const { results } = await dkimVerify(got!.raw, { resolver });
      expect(
        results.map((r) => [r.signingDomain, r.status.result]),
        address,
      ).to.deep.equal([[DOMAIN, 'pass']]);
      expect(got!.from, address).to.match(/^bounces\+[0-9a-f]+@rp\.example\.com$/);
    }
  });

  it('kill -9 of node 2 under load: nodes 1 and 3 answer every request, and node 2 delivers all it acknowledged once restarted', async () => {
    // Node 2's mail is held at the sink: at the kill it has deliveries in flight and a queue.
    sink.hold = (m) => (m.to.some((a) => a.startsWith('load2-')) ? new Promise<void>((resolve) => releases.push(resolve)) : undefined);
    const acknowledged = new Map<number, string[]>([
      [1, []],
      [2, []],
      [3, []],
    ]);
    const failures = new Map<number, string[]>([
      [1, []],
      [2, []],
      [3, []],
    ]);
    let sending = true;
    let counter = 0;
    const worker = async (n: number): Promise<void> => {
      while (sending) {
        const recipients = Array.from({ length: 5 }, () => `load${n}-${counter++}@example.org`);
        try {
          const res = await call(n, 'POST', '/messages', message(recipients, `load on node ${n}`));
          if (res.status === 202) acknowledged.get(n)!.push(...recipients);
          else failures.get(n)!.push(`HTTP ${res.status} ${JSON.stringify(res.body)}`);
        } catch (err) {
          failures.get(n)!.push((err as Error).message);
          // Node 2 is dead: nothing listens, no point in asking again at once.
          await sleep(50);
        }
      }
    };
    const load = [1, 2, 3].flatMap((n) => [worker(n), worker(n)]);

    await until(() => acknowledged.get(2)!.length >= 50 && sink.held >= 1, 'node 2 with mail acknowledged and in flight');
    const killedAt = acknowledged.get(2)!.length;
    node(2).child.signal('SIGKILL');
    await node(2).child.exited;
    const heldAtKill = new Set(sink.received.filter((r) => !r.answered && r.to.some((a) => a.startsWith('load2-'))).flatMap((r) => r.to));
    // The load goes on against nodes 1 and 3 with node 2 gone.
    const [served1, served3] = [acknowledged.get(1)!.length, acknowledged.get(3)!.length];
    await until(() => acknowledged.get(1)!.length >= served1 + 50 && acknowledged.get(3)!.length >= served3 + 50, 'nodes 1 and 3 answering with node 2 dead');
    sending = false;
    await Promise.all(load);
    // The replies held for the killed process go to closed sockets.
    sink.hold = () => undefined;
    for (const release of releases.splice(0)) release();

    expect(failures.get(1), 'failed requests to node 1').to.deep.equal([]);
    expect(failures.get(3), 'failed requests to node 3').to.deep.equal([]);
    expect(failures.get(2)!.length, 'requests to node 2 after its kill failed').to.be.at.least(1);
    expect(acknowledged.get(2)!.length).to.be.at.least(killedAt);
    // Nodes 1 and 3 deliver what they accepted with node 2 down.
    const others = [...acknowledged.get(1)!, ...acknowledged.get(3)!];
    await until(() => others.every((a) => copiesTo(a).length >= 1), 'the mail of nodes 1 and 3 delivered', 60_000);

    const restarted = await startNode(2);
    expect(restarted.child.stdout).not.to.match(/aha-sk-/);
    const mine = acknowledged.get(2)!;
    await until(() => mine.every((a) => copiesTo(a).length >= 1), `all ${mine.length} messages node 2 acknowledged delivered`, 60_000).catch((err: Error) => {
      throw new Error(`${err.message}; missing: ${mine.filter((a) => copiesTo(a).length === 0).join(' ')}`);
    });
    // Twice only what was in flight at the kill; and never a message of another node twice.
    const loaded = sink.received.flatMap((r) => r.to).filter((a) => a.startsWith('load'));
    const twice = loaded.filter((a, i) => loaded.indexOf(a) !== i);
    for (const address of twice) expect(heldAtKill.has(address), `${address} delivered twice`).to.equal(true);
  });

  /** `postilion cluster status --json`, through node 1's configuration. */
  async function clusterStatus(): Promise<{ leader: string | null; live_nodes: number; nodes: Array<{ id: string; state: string; leader: boolean }> }> {
    const status = await run(['--config', configPath(1), 'cluster', 'status', '--json'], dir);
    expect(status.code, status.stderr).to.equal(0);
    return JSON.parse(status.stdout) as never;
  }

  it('the leader is killed (kill -9) and another live node holds the lease within 10 s; the killed node starts again at once', async () => {
    const before = await until(async () => (await clusterStatus()).leader, 'a leader');
    const n = Number(before.replace('node', ''));
    const killed = node(n);
    await killed.child.kill();
    nodes.delete(n);
    const killedAt = Date.now();
    const after = await until(
      async () => {
        const status = await clusterStatus();
        return status.leader !== null && status.leader !== before ? status.leader : null;
      },
      'another leader',
      10_000,
    );
    expect(Date.now() - killedAt).to.be.below(10_000);
    expect(after).to.not.equal(before);
    // Its node id is its own again at once (the session lock went with the process), though its last heartbeat is fresh.
    await startNode(n);
    const status = await until(async () => {
      const s = await clusterStatus();
      return s.nodes.find((x) => x.id === before)?.state === 'live' ? s : null;
    }, `${before} live again`);
    expect(status.live_nodes).to.equal(3);
  });

  it('queue drain --to moves a queue to another node: it delivers every message, none twice, none left behind', async () => {
    // Node 3 holds mail due in 20 s; the drain hands it to node 1, which delivers it when it is due.
    const due = new Date(Date.now() + 20_000).toISOString();
    const recipients = Array.from({ length: 6 }, (_, i) => `drain-${i}@example.net`);
    const res = await call(3, 'POST', '/messages', { ...message(recipients, 'Drained'), schedule: { first_attempt: due } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const drain = await run(['--config', configPath(3), 'queue', 'drain', '--to', 'node1', '--json'], dir);
    expect(drain.code, drain.stderr).to.equal(0);
    const result = JSON.parse(drain.stdout.trim().split('\n').at(-1)!) as { result: { moved: number; in_delivery: number } };
    expect(result.result).to.deep.equal({ from: 'node3', to: 'node1', moved: 6, in_delivery: 0 });
    for (const to of recipients) await until(() => copiesTo(to).length > 0, `${to} delivered`, 60_000);
    await sleep(1000);
    for (const to of recipients) {
      expect(copiesTo(to), to).to.have.length(1);
    }
  });
});
