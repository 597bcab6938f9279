import { expect } from 'chai';
import { clusterView, MAX_RETRY_IDS, operatorRoutes } from '../../../src/dashboard/operator.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { ask, mountRoutes } from './route-mount.ts';

/** The operator's page over a running daemon's own control handlers: the queue, the accounts, the system. */
describe('dashboard operator routes', function () {
  this.timeout(30_000);
  let server: TestServer;
  let mount: { url: string; close: () => Promise<void> };
  let logLines: string[];
  const op = (method: string, path: string, body?: unknown) => ask(mount.url, 'operator', method, `/ui/api/operator${path}`, body);

  before(async () => {
    logLines = [];
    server = await startServer({ logLines });
    const { daemon } = server;
    mount = await mountRoutes(
      daemon.core,
      operatorRoutes({ control: () => daemon.parts.control.handlers, readiness: () => daemon.readiness(), nodes: () => null }),
      logLines,
    );
  });
  after(async () => {
    await mount?.close();
    await server?.stop();
  });

  it('answers only the operator: an account session gets 403', async () => {
    const res = await ask(mount.url, server.adminKey, 'GET', '/ui/api/operator/queue/status');
    expect(res.status).to.equal(403);
    expect(res.body).to.deep.equal({ message: "the operator's page" });
  });

  it('shows the queue as `postilion queue status` does, and lists messages with bounded filters', async () => {
    const status = await op('GET', '/queue/status');
    expect(status.status).to.equal(200);
    expect(status.body.totals).to.include({ queued: 0 });
    expect(status.body.daemon).to.not.equal(null);
    expect((await op('GET', '/queue/messages?state=held&limit=10')).body).to.include({ more: 0 });
    for (const query of ['?state=lost', '?limit=0', '?limit=100000', '?limit=abc', `?domain=${'a'.repeat(300)}`, '?unknown=1']) {
      const res = await op('GET', `/queue/messages${query}`);
      expect(res.status, query).to.equal(400);
      expect(res.body.message, query).to.be.a('string');
    }
  });

  it('retries, suspends and resumes through the control handlers, refusing bad bodies with 400, and logs each action', async () => {
    expect((await op('POST', '/queue/retry', { domain: 'example.org' })).body).to.include({ retried: 0 });
    const refusals: unknown[] = [
      {},
      { all: true },
      { ids: [] },
      { ids: Array.from({ length: MAX_RETRY_IDS + 1 }, () => '01900000-0000-7000-8000-000000000000') },
      { ids: [7] },
      'not json',
      [1],
    ];
    for (const body of refusals) {
      const res = await op('POST', '/queue/retry', body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).to.equal(400);
      expect(res.body.message).to.be.a('string');
    }
    // A URL origin: a name that needs no MX lookup.
    const suspended = await op('POST', '/queue/suspend', { destination: 'https://hooks.example.com' });
    expect(suspended.status).to.equal(200);
    expect(suspended.body).to.include({ suspended: true, changed: true });
    expect((await op('GET', '/queue/status')).body.suspended.map((s: { destination: string }) => s.destination)).to.include(suspended.body.destination);
    expect((await op('POST', '/queue/resume', { destination: 'https://hooks.example.com' })).body).to.include({ suspended: false, changed: true });
    expect((await op('POST', '/queue/suspend', { destination: '' })).status).to.equal(400);
    expect((await op('POST', '/queue/suspend', { destination: 'a\r\nb' })).status).to.equal(400);
    expect(logLines.some((l) => l.includes('operator changed a destination') && l.includes('"via":"dashboard"'))).to.equal(true);
    expect(logLines.some((l) => l.includes('operator retried queued messages'))).to.equal(true);
  });

  it('lists accounts and suspends and unsuspends one, with a bounded reason', async () => {
    const list = await op('GET', '/accounts');
    expect(list.body.accounts.map((a: { id: string }) => a.id)).to.include(server.accountId);
    const account = server.accountId;
    expect((await op('POST', '/accounts/suspend', { account, reason: 'x'.repeat(501) })).status).to.equal(400);
    expect((await op('POST', '/accounts/suspend', { account, reason: '   ' })).status).to.equal(400);
    expect((await op('POST', '/accounts/suspend', { account: 'not-an-id', reason: 'abuse' })).status).to.equal(400);
    expect((await op('POST', '/accounts/suspend', { account: '01900000-0000-7000-8000-000000000000', reason: 'abuse' })).status).to.equal(404);
    const suspended = await op('POST', '/accounts/suspend', { account, reason: 'abuse report' });
    expect(suspended.status).to.equal(200);
    expect(suspended.body.status).to.equal('suspended');
    expect(suspended.body.suspension).to.include({ reason: 'abuse report', by: 'operator' });
    const back = await op('POST', '/accounts/unsuspend', { account });
    expect(back.body.status).to.equal('active');
    expect(logLines.some((l) => l.includes('operator suspended an account'))).to.equal(true);
  });

  it('shows readiness, the listeners and no cluster on a node on its own', async () => {
    const res = await op('GET', '/system');
    expect(res.status).to.equal(200);
    expect(res.body.readiness).to.deep.include({ name: 'control', ok: true });
    expect(res.body.listeners.map((l: { name: string }) => l.name)).to.include('api');
    expect(res.body.cluster).to.equal(null);
  });

  it("shows a cluster's nodes as its status reads them", () => {
    const view = clusterView('a', {
      schema: 1,
      release_schema: 1,
      leader: 'a',
      leader_backend_pid: null,
      live_nodes: 1,
      nodes: [
        {
          id: 'a',
          state: 'live',
          leader: true,
          started_at: '2026-11-28T00:00:00.000Z',
          heartbeat_at: '2026-11-28T01:00:00.000Z',
          heartbeat_age_seconds: 1,
          stopped_at: null,
          info: { version: '0.1.0', hostname: 'h', api_url: 'http://127.0.0.1:1', queue: { queued: 3, ready: 0, in_flight: 0 } },
          publication: null,
        },
        {
          id: 'b',
          state: 'lost',
          leader: false,
          started_at: '',
          heartbeat_at: '2026-11-28T00:00:00.000Z',
          heartbeat_age_seconds: 99,
          stopped_at: null,
          info: {},
          publication: null,
        },
      ],
    });
    expect(view.node_id).to.equal('a');
    expect(view.nodes[0]).to.include({ id: 'a', live: true, leader: true, last_seen: '2026-11-28T01:00:00.000Z', version: '0.1.0' });
    expect(view.nodes[1]).to.include({ id: 'b', live: false, state: 'lost', version: null, queue: null });
  });
});
