import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openClusterDb } from '../../../src/cluster/database.ts';
import { validateConfig } from '../../../src/config/load.ts';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.ts';
import { RawSmtp } from '../../helpers/raw-smtp.ts';

/**
 * The cluster database going away under a running node (a crash, a restart, a failover): what
 * needs shared records is refused with "try again later" (HTTP 503 with Retry-After, SMTP 451
 * 4.3.0), never a 500 or a crash, and served again once the database is back.
 */
describe('cluster: the database out of reach', function () {
  this.timeout(60_000);
  let postgres: PostgresServer;
  let dir: string;
  let node: TestServer | undefined;
  const logLines: string[] = [];

  before(async () => {
    postgres = await startPostgres();
    dir = mkdtempSync(join(tmpdir(), 'postilion-away-'));
    const cluster = { database_url: postgres.url, node_id: 'node-1', key_file: join(dir, 'cluster.key') };
    const db = await openClusterDb(validateConfig({ cluster, keys: { dir: join(dir, 'keys') } }, 'test'), { createKey: true });
    await db.close();
    node = await startServer({ config: { cluster, smtp: { inbound: { enabled: true, port: 0 } } }, logLines });
  });
  after(async () => {
    await node?.stop();
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const keys = () => `/v2/accounts/${node!.accountId}/api-keys`;

  async function rcpt(to: string): Promise<{ code: number; raw: string }> {
    const { client } = await RawSmtp.open(node!.daemon.parts.inbound.port!, { localAddress: '127.0.0.1' });
    try {
      await client.command('EHLO client.example.net');
      await client.command('MAIL FROM:<c@example.net>');
      return await client.command(`RCPT TO:<${to}>`);
    } finally {
      client.close();
    }
  }

  it('answers 503 with Retry-After and SMTP 451 4.3.0 while it is away, and serves again once it is back', async () => {
    expect((await call(node!, 'GET', keys())).status).to.equal(200);
    expect((await rcpt('someone@not-served.example')).code).to.equal(550);

    await postgres.halt();
    // A read of shared records (a list is never cached), a write, and the keys' lookup once the
    // node dropped its cache (its listening connection was lost).
    const listed = await call(node!, 'GET', keys());
    expect(listed.status).to.equal(503);
    expect(listed.body.message).to.equal('service unavailable: the cluster database cannot be reached; try again later');
    expect(Number(listed.headers.get('retry-after'))).to.be.above(0);
    const made = await call(node!, 'POST', keys(), { body: { label: 'while away', scopes: ['api-keys:read'] } });
    expect(made.status).to.equal(503);
    expect((await call(node!, 'GET', `/v2/accounts/${node!.accountId}/domains`)).status).to.equal(503);
    const refused = await rcpt('someone@not-served.example');
    expect(refused.code).to.equal(451);
    expect(refused.raw).to.contain('4.3.0 The cluster database cannot be reached; try again later');
    expect(
      logLines.filter((line) => /"level":50/.test(line)),
      'nothing logged as an internal error',
    ).to.deep.equal([]);

    await postgres.resume();
    const deadline = Date.now() + 15_000;
    let status = 0;
    while (Date.now() < deadline && status !== 200) {
      status = (await call(node!, 'GET', keys(), { operationId: null })).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).to.equal(200);
    expect((await call(node!, 'POST', keys(), { body: { label: 'back', scopes: ['api-keys:read'] } })).status).to.equal(201);
    expect((await rcpt('someone@not-served.example')).code).to.equal(550);
  });
});
