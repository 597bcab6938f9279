import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig } from '../../../src/config/load.ts';
import { openClusterDb } from '../../../src/cluster/database.ts';
import { IdempotencyRepo } from '../../../src/store/idempotency-repo.ts';
import { WriteConflictError } from '../../../src/store/store.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';

/** Two nodes on one PostgreSQL share accounts, keys, domains and suppressions, and hear of each other's changes. */
describe('cluster: shared state on PostgreSQL', function () {
  this.timeout(60_000);
  let postgres: PostgresServer;
  let dir: string;
  const nodes: TestServer[] = [];

  before(async () => {
    postgres = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), 'postilion-cluster-'));
  });
  after(async () => {
    for (const node of nodes) await node.stop();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const clusterConfig = (url: string, nodeId: string) => ({ database_url: url, node_id: nodeId, key_file: join(dir, 'cluster.key') });

  async function statusWithin(ms: number, request: () => Promise<{ status: number }>, wanted: number): Promise<number> {
    const deadline = Date.now() + ms;
    let status = 0;
    while (Date.now() < deadline) {
      status = (await request()).status;
      if (status === wanted) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    return status;
  }

  async function startNodes(count: number): Promise<TestServer[]> {
    const url = await postgres.createDatabase();
    // `postilion cluster init`: the key, and the schema.
    const db = await openClusterDb(validateConfig({ cluster: clusterConfig(url, 'init'), keys: { dir: join(dir, 'keys') } }, 'test'), { createKey: true });
    await db.close();
    const out: TestServer[] = [];
    for (let i = 1; i <= count; i++) out.push(await startServer({ config: { cluster: clusterConfig(url, `node-${i}`) } }));
    nodes.push(...out);
    return out;
  }

  it('a key made on one node works on the other; deleted there, it is refused here within a second', async () => {
    const [a, b] = await startNodes(2);
    expect(a!.adminKey).to.match(/^aha-sk-/);
    // The second node found the accounts in the database: no bootstrap of its own.
    expect(b!.adminKey).to.equal('');
    const base = `/v2/accounts/${a!.accountId}/api-keys`;
    const viaB = { url: b!.url, adminKey: a!.adminKey };
    expect((await call(viaB, 'GET', base)).status).to.equal(200);

    const made = await call(a!, 'POST', base, { body: { label: 'shared', scopes: ['api-keys:read'] } });
    expect(made.status).to.equal(201);
    const key = made.body.secret_key as string;
    expect((await call({ url: b!.url, adminKey: key }, 'GET', base)).status).to.equal(200);
    expect((await call({ url: a!.url, adminKey: key }, 'GET', base)).status).to.equal(200);

    expect((await call(viaB, 'DELETE', `${base}/${made.body.id}`)).status).to.be.oneOf([200, 204]);
    const deadline = Date.now() + 1000;
    let status = 0;
    while (Date.now() < deadline) {
      status = (await call({ url: a!.url, adminKey: key }, 'GET', base, { operationId: null })).status;
      if (status === 401) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).to.equal(401);

    // An IP allow list narrowed on one node shuts the key out on the other within a second.
    const narrowed = await call(a!, 'POST', base, { body: { label: 'narrowed', scopes: ['api-keys:read'] } });
    const secret = narrowed.body.secret_key as string;
    expect((await call({ url: a!.url, adminKey: secret }, 'GET', base)).status).to.equal(200);
    expect((await call(viaB, 'PUT', `${base}/${narrowed.body.id}`, { body: { ip_allow_list: ['10.0.0.0/8'] } })).status).to.equal(200);
    expect(await statusWithin(1000, () => call({ url: a!.url, adminKey: secret }, 'GET', base, { operationId: null }), 403)).to.equal(403);
  });

  it("a webhook made on one node is in the other node's list for its account within a second", async () => {
    const [a, b] = await startNodes(2);
    const accountId = a!.accountId;
    expect(await b!.daemon.core.webhooks.ofAccount(accountId)).to.have.length(0);
    const id = '0190f3a0-0000-7000-8000-00000000aaaa';
    const record = { id, accountId, name: 'w', url: 'https://hooks.example.com/x', createdAt: new Date().toISOString() };
    await a!.daemon.core.store.commit(a!.daemon.core.webhooksRepo.create(record as never));
    const deadline = Date.now() + 1000;
    let ids: string[] = [];
    while (Date.now() < deadline) {
      ids = (await b!.daemon.core.webhooks.ofAccount(accountId)).map((w) => w.id);
      if (ids.length > 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(ids).to.deep.equal([id]);
  });

  it('an idempotent retry on another node replays; another payload gets 422; two nodes claiming one key at once: one wins', async () => {
    const [a, b] = await startNodes(2);
    const base = `/v2/accounts/${a!.accountId}/api-keys`;
    const viaB = { url: b!.url, adminKey: a!.adminKey };
    const headers = { 'Idempotency-Key': 'retry-1' };
    const first = await call(a!, 'POST', base, { body: { label: 'once', scopes: ['api-keys:read'] }, headers });
    expect(first.status).to.equal(201);
    const again = await call(viaB, 'POST', base, { body: { label: 'once', scopes: ['api-keys:read'] }, headers });
    expect(again.status).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body.id).to.equal(first.body.id);
    const other = await call(viaB, 'POST', base, { body: { label: 'other', scopes: ['api-keys:read'] }, headers, operationId: null });
    expect(other.status).to.equal(422);

    const repos = [a!, b!].map((n) => new IdempotencyRepo(n.daemon.core.store));
    const record = (owner: string) => ({
      v: 1 as const,
      accountId: a!.accountId,
      key: 'race',
      fingerprint: owner,
      state: 'in_progress' as const,
      expiresAt: Date.now() + 60_000,
      response: null,
      owner: { keyId: owner, scopes: '' },
    });
    const results = await Promise.allSettled(repos.map((repo, i) => repo.save(record(`n${i}`) as never)));
    expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(1);
    const refused = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')!;
    expect(refused.reason).to.be.instanceOf(WriteConflictError);
  });
});
