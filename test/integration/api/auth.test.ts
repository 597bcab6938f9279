import { expect } from 'chai';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';

describe('API authentication', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server.stop();
  });

  it('answers ping with pong for a valid key', async () => {
    const res = await call(server, 'GET', '/v2/ping', { operationId: 'ping' });
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ message: 'pong' });
  });

  it('sends x-request-id on every response, errors included', async () => {
    const ok = await call(server, 'GET', '/v2/ping');
    const denied = await call(server, 'GET', '/v2/ping', { key: null });
    const missing = await call(server, 'GET', '/nowhere');
    for (const res of [ok, denied, missing]) expect(res.headers.get('x-request-id')).to.match(/^[0-9a-f-]{36}$/);
    expect(ok.headers.get('x-request-id')).to.not.equal(denied.headers.get('x-request-id'));
  });

  it('refuses a missing bearer token with 401', async () => {
    const res = await call(server, 'GET', '/v2/ping', { key: null, operationId: 'ping' });
    expect(res.status).to.equal(401);
    expect(res.body.message).to.equal('Missing or malformed bearer token');
  });

  it('refuses malformed tokens with 401', async () => {
    for (const authorization of ['Basic abc', 'Bearer', 'Bearer aha-sk-short', `Bearer aha-pk-${'a'.repeat(64)}`, `Bearer aha-sk-${'a'.repeat(63)}!`]) {
      const res = await call(server, 'GET', '/v2/ping', { key: null, headers: { authorization } });
      expect(res.status, authorization).to.equal(401);
    }
  });

  it('refuses a well-formed but unknown key with 401', async () => {
    const res = await call(server, 'GET', '/v2/ping', { key: `aha-sk-${'A'.repeat(64)}`, operationId: 'ping' });
    expect(res.status).to.equal(401);
    expect(res.body.message).to.equal('Invalid API key');
  });

  it('refuses a deleted key with 401', async () => {
    const created = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, {
      body: { label: 'short-lived', scopes: ['api-keys:read'] },
    });
    expect(created.status).to.equal(201);
    const secret = created.body.secret_key as string;
    expect((await call(server, 'GET', '/v2/ping', { key: secret })).status).to.equal(200);
    const del = await call(server, 'DELETE', `/v2/accounts/${server.accountId}/api-keys/${created.body.id}`, { operationId: 'deleteAPIKey' });
    expect(del.status).to.equal(200);
    expect(del.body.message).to.contain(created.body.id);
    expect((await call(server, 'GET', '/v2/ping', { key: secret })).status).to.equal(401);
  });

  it('applies a change of a key to its very next request, though its secret was used just before', async () => {
    const created = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, {
      body: { label: 'changing', scopes: ['api-keys:read'] },
    });
    expect(created.status).to.equal(201);
    const secret = created.body.secret_key as string;
    const path = `/v2/accounts/${server.accountId}/api-keys`;
    expect((await call(server, 'GET', path, { key: secret })).status).to.equal(200);
    const narrowed = await call(server, 'PUT', `${path}/${created.body.id}`, { body: { scopes: ['domains:read'] }, operationId: 'updateAPIKey' });
    expect(narrowed.status).to.equal(200);
    expect((await call(server, 'GET', path, { key: secret })).status).to.equal(403);
    const fenced = await call(server, 'PUT', `${path}/${created.body.id}`, { body: { ip_allow_list: ['192.0.2.0/24'] }, operationId: 'updateAPIKey' });
    expect(fenced.status).to.equal(200);
    const outside = await call(server, 'GET', '/v2/ping', { key: secret });
    expect(outside.status).to.equal(403);
    expect(outside.body.message).to.contain('ip_allow_list');
  });

  it('refuses a key used against another account with 401', async () => {
    const other = '01890a5d-ac96-774b-bcce-b302099a8057';
    const res = await call(server, 'GET', `/v2/accounts/${other}/api-keys`, { operationId: 'getAPIKeys' });
    expect(res.status).to.equal(401);
  });

  it('answers 400 for an account_id that is not a UUID', async () => {
    const res = await call(server, 'GET', '/v2/accounts/not-a-uuid/api-keys', { operationId: 'getAPIKeys' });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.equal('invalid account_id');
  });

  it('checks authentication before the account_id format', async () => {
    const res = await call(server, 'GET', '/v2/accounts/not-a-uuid/api-keys', { key: null });
    expect(res.status).to.equal(401);
  });

  it('answers 404 with a message for unknown routes', async () => {
    for (const path of ['/v2/nothing', `/v2/accounts/${server.accountId}/nothing`, '/']) {
      const res = await call(server, 'GET', path);
      expect(res.status, path).to.equal(404);
      expect(res.body).to.deep.equal({ message: 'not found' });
    }
  });

  it('answers 405 for a known path with the wrong method', async () => {
    const res = await call(server, 'PATCH', '/v2/ping');
    expect(res.status).to.equal(405);
    expect(res.body.message).to.equal('method not allowed');
  });

  it('answers 405 with an Allow header for a known path with the wrong method', async () => {
    const res = await call(server, 'POST', '/v2/ping');
    expect(res.status).to.equal(405);
    expect(res.headers.get('allow')).to.contain('GET');
  });

  it('answers requests Node refuses itself with a JSON error body', async () => {
    const { connect } = await import('node:net');
    const { port } = new URL(server.url);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () => socket.write('GET /v2/ping HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'));
      let data = '';
      socket.on('data', (d) => (data += d.toString()));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });
    expect(raw).to.match(/^HTTP\/1\.1 400 /);
    expect(raw).to.contain('{"message":"bad request"}');
  });

  it('does not read the body of an unauthenticated request', async () => {
    const res = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, { key: null, rawBody: 'x'.repeat(30 * 1024 * 1024) });
    expect(res.status).to.equal(401);
  });

  it('refuses the keys of a suspended account with 401', async () => {
    const { core } = server.daemon;
    const other = await core.accounts.create({ name: 'S', website: 'https://s.example', ownerEmail: 'o@s.example' });
    const { secret } = await core.apiKeys.create(other.id, { label: 's', scopes: ['accounts:read'] });
    expect((await call(server, 'GET', '/v2/ping', { key: secret })).status).to.equal(200);
    await core.store.commit([{ type: 'put', family: 'accounts', key: other.id, value: { ...other, status: 'suspended' } }]);
    const res = await call(server, 'GET', '/v2/ping', { key: secret });
    expect(res.status).to.equal(401);
    expect(res.body.message).to.equal('Account is suspended');
  });

  it('never undoes a concurrent allow-list change while recording last_used_at', async () => {
    const base = `/v2/accounts/${server.accountId}/api-keys`;
    const created = await call(server, 'POST', base, { body: { label: 'race', scopes: ['accounts:read'] } });
    const secret = created.body.secret_key as string;
    // Hold the update's commit open, so that the key's first uses read it before the change lands.
    const { store } = server.daemon.core;
    const commit = store.commit.bind(store);
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    store.commit = async (ops) => {
      if (ops.some((op) => op.type === 'put' && (op.value as { ipAllowList?: string[] }).ipAllowList?.length)) {
        holding();
        await new Promise((r) => setTimeout(r, 150));
      }
      return commit(ops);
    };
    try {
      const update = call(server, 'PUT', `${base}/${created.body.id}`, { body: { ip_allow_list: ['10.9.0.0/16'] } });
      await held;
      // Each ping is judged by the key as it stands once the update is done (so 403 here).
      await Promise.all(Array.from({ length: 3 }, () => call(server, 'GET', '/v2/ping', { key: secret })));
      expect((await update).status).to.equal(200);
    } finally {
      store.commit = commit;
    }
    const got = await call(server, 'GET', `${base}/${created.body.id}`);
    expect(got.body.ip_allow_list).to.deep.equal(['10.9.0.0/16']);
    expect(got.body.last_used_at).to.be.a('string');
    expect((await call(server, 'GET', '/v2/ping', { key: secret })).status).to.equal(403);
  });
});
