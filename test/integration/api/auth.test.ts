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
});
