import { expect } from 'chai';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { main } from '../../../src/cli/main.ts';
import { SecretBox } from '../../../src/util/secret-box.ts';
import { activeDkimOf, testMessage } from '../../helpers/domains.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

/** `postilion cluster import`: a single node's control plane copied into an empty cluster database, then served by every node. */
describe('cluster: postilion cluster import', function () {
  this.timeout(60_000);
  let postgres: PostgresServer;
  let dir: string;
  let single: MessageBed | null = null;
  const nodes: TestServer[] = [];

  before(async () => {
    postgres = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), 'postilion-cluster-import-'));
  });
  after(async () => {
    await single?.stop();
    for (const node of nodes) await node.stop();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function cli(configPath: string, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, ...args], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  it("copies accounts, keys, domains with their DKIM keys and the secrets; every node then serves them, the node's mail stays its own", async () => {
    const nodeDir = join(dir, 'node-1');
    single = await startMessageBed({}, 'example.com', { dir: nodeDir });
    const { accountId, adminKey } = single.server;
    const domain = single.domain;
    const dkim = activeDkimOf(domain);
    const readKey = await single.key(['domains:read']);
    const queued = await single.send();
    expect(queued.status).to.equal(202);
    const messageId = queued.body.data[0].id as string;
    const keyFiles = readdirSync(join(nodeDir, 'keys', 'dkim', domain.id));

    const url = await postgres.createDatabase();
    const cluster = { database_url: url, node_id: 'node-1', key_file: join(dir, 'cluster.key') };
    const configPath = join(dir, 'node-1.yaml');
    writeFileSync(
      configPath,
      `data:\n  dir: ${join(nodeDir, 'data')}\nkeys:\n  dir: ${join(nodeDir, 'keys')}\nlog:\n  level: silent\ncluster:\n  database_url: ${url}\n  node_id: node-1\n  key_file: ${cluster.key_file}\n`,
    );

    // The daemon holds its store: nothing is imported.
    const running = await cli(configPath, 'cluster', 'import');
    expect(running.code).to.equal(2);
    expect(running.err).to.match(/^postilion: data directory \S+ is in use by another process/);
    await single.stop();
    single = null;

    const imported = await cli(configPath, 'cluster', 'import');
    expect(imported.err).to.equal('');
    expect(imported.code).to.equal(0);
    expect(imported.out).to.match(/^imported the store in \S+ into the cluster database\nrecords: \d+ \(accounts 1, [^\n]*apiKeys 2, [^\n]*domains 1,/);
    expect(imported.out).to.contain('secrets: secret-box.key, tracking.key, webhook-secrets.key, route-secrets.key, verp.key\n');
    expect(imported.out).to.contain(`DKIM private keys: ${keyFiles.length}\n`);
    expect(imported.out).to.contain(`cluster key: ${cluster.key_file} (made now: copy it to every node)\n`);
    expect(existsSync(cluster.key_file)).to.equal(true);

    const again = await cli(configPath, 'cluster', 'import');
    expect(again).to.deep.include({
      code: 2,
      out: '',
      err: 'postilion: the cluster database already holds accounts and keys: import only into an empty one (a new database)\n',
    });

    // The imported node and a new one, in cluster mode.
    const first = await startServer({ dir: nodeDir, config: { cluster } });
    nodes.push(first);
    const second = await startServer({ config: { cluster: { ...cluster, node_id: 'node-2' } } });
    nodes.push(second);
    // The accounts were there: no node made one of its own.
    expect([first.adminKey, second.adminKey]).to.deep.equal(['', '']);

    for (const node of [first, second]) {
      const as = (key: string) => ({ url: node.url, adminKey: key });
      expect((await call(as(adminKey), 'GET', `/v2/accounts/${accountId}`)).status).to.equal(200);
      const domains = await call(as(readKey), 'GET', `/v2/accounts/${accountId}/domains`);
      expect(domains.status).to.equal(200);
      expect(domains.body.data.map((d: { domain: string; dns_valid: boolean }) => [d.domain, d.dns_valid])).to.deep.equal([['example.com', true]]);
      // A domain-read key may do no more there than here.
      expect((await call(as(readKey), 'GET', `/v2/accounts/${accountId}/api-keys`)).status).to.equal(403);
    }

    // The node that never had the key file signs with the imported key, which the published record verifies.
    const message = testMessage();
    const signed = (await second.daemon.core.signer.sign('example.com', message)) + message;
    const resolver = async (name: string) => {
      if (name === dkim.host) return [[dkim.content]];
      throw Object.assign(new Error(`no record for ${name}`), { code: 'ENOTFOUND' });
    };
    const { results } = await dkimVerify(signed, { resolver });
    expect(results.map((r) => r.status.result)).to.deep.equal(['pass']);

    // The secrets are the node's own: its tracking links and VERP addresses stay valid.
    expect(second.daemon.core.trackingKey.equals(SecretBox.loadOrCreate(join(nodeDir, 'keys', 'tracking.key')).rawKey())).to.equal(true);

    // Mail is sent from any node; the imported node's queued mail stayed with it.
    const sent = await call({ url: second.url, adminKey }, 'POST', `/v2/accounts/${accountId}/messages`, {
      body: { from: { email: 'app@example.com' }, recipients: [{ email: 'rcpt@example.org' }], subject: 'Hi', text_content: 'Hi' },
    });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(202);
    const uuid = messageId.slice(1, messageId.indexOf('@'));
    const kept = (await first.daemon.core.messagesRepo.get(uuid))!;
    expect(kept.status).to.equal('Received');
    expect(await first.daemon.core.messagesRepo.isScheduled(kept)).to.equal(true);
  });
});
