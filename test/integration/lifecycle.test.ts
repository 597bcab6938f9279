import { expect } from 'chai';
import { call, startServer, type TestServer } from '../helpers/harness.ts';

describe('daemon lifecycle and logs', () => {
  let server: TestServer | null = null;
  afterEach(async () => {
    await server?.stop();
    server = null;
  });

  it('lets an in-flight request finish on stop, then refuses new connections', async () => {
    server = await startServer();
    const { accounts } = server.daemon.core;
    const original = accounts.require.bind(accounts);
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    accounts.require = async (id) => {
      entered();
      await new Promise((r) => setTimeout(r, 300));
      return original(id);
    };
    const slow = call(server, 'GET', `/v2/accounts/${server.accountId}`);
    await inside;
    const stopped = server.daemon.stop();
    expect((await slow).status).to.equal(200);
    await stopped;
    let refused = false;
    await call(server, 'GET', '/v2/ping').catch(() => (refused = true));
    expect(refused).to.equal(true);
  });

  it('cuts a request that outlives the grace period and still stops', async () => {
    server = await startServer({ config: { shutdown: { grace_seconds: 0.5 } } });
    const { accounts } = server.daemon.core;
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    accounts.require = async () => {
      entered();
      return new Promise(() => {});
    };
    const hung = call(server, 'GET', `/v2/accounts/${server.accountId}`).then(
      () => 'answered',
      () => 'cut',
    );
    await inside;
    const started = Date.now();
    await server.daemon.stop();
    expect(Date.now() - started).to.be.within(400, 3000);
    expect(await hung).to.equal('cut');
  });

  it('logs one line per request with request_id and account_id, and no secret', async () => {
    const lines: string[] = [];
    server = await startServer({ logLines: lines });
    const res = await call(server, 'GET', `/v2/accounts/${server.accountId}/api-keys`);
    const requestId = res.headers.get('x-request-id');
    const entries = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.request_id === requestId);
    expect(entries).to.have.length(1);
    expect(entries[0]).to.include({ account_id: server.accountId, method: 'GET', status: 200, msg: 'request' });
    expect(lines.join('\n')).to.not.contain(server.adminKey);
  });
});
