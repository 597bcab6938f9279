import { expect } from 'chai';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';

describe('scope enforcement per operation', () => {
  let server: TestServer;
  let base: string;
  before(async () => {
    server = await startServer();
    base = `/v2/accounts/${server.accountId}`;
  });
  after(async () => {
    await server.stop();
  });

  async function keyWith(scopes: string[]): Promise<string> {
    const res = await call(server, 'POST', `${base}/api-keys`, { body: { label: scopes.join(' '), scopes } });
    expect(res.status).to.equal(201);
    return res.body.secret_key;
  }

  // Each operation, a request for it, and the scope the table says it needs.
  const cases: Array<{ op: string; method: string; path: (id: string) => string; body?: object; scope: string }> = [
    { op: 'getAPIKeys', method: 'GET', path: () => '/api-keys', scope: 'api-keys:read' },
    { op: 'createAPIKey', method: 'POST', path: () => '/api-keys', body: { label: 'x', scopes: ['api-keys:write'] }, scope: 'api-keys:write' },
    { op: 'getAccount', method: 'GET', path: () => '', scope: 'accounts:read' },
    { op: 'updateAccount', method: 'PUT', path: () => '', body: { about: 'x' }, scope: 'accounts:write' },
    { op: 'getAccountMembers', method: 'GET', path: () => '/members', scope: 'accounts:members:read' },
    { op: 'addAccountMember', method: 'POST', path: () => '/members', body: { email: 'scoped@example.com', role: 'Analyst' }, scope: 'accounts:members:add' },
  ];

  for (const c of cases) {
    it(`${c.op} answers 403 without ${c.scope} and runs with it`, async () => {
      const without = await keyWith(['domains:read']);
      const denied = await call(server, c.method, base + c.path(server.accountId), {
        key: without,
        ...(c.body ? { body: c.body } : {}),
        operationId: c.op,
      });
      expect(denied.status).to.equal(403);
      expect(denied.body.message).to.equal('Insufficient permissions for the required scope');
      const withScope = await keyWith([c.scope]);
      const allowed = await call(server, c.method, base + c.path(server.accountId), {
        key: withScope,
        ...(c.body ? { body: c.body } : {}),
        operationId: c.op,
      });
      expect(allowed.status, JSON.stringify(allowed.body)).to.be.within(200, 201);
    });
  }

  it('lets the wildcard scope through every operation', async () => {
    // Only the operator can mint a wildcard key: no API key holds '*' to grant it.
    const key = (await server.daemon.core.apiKeys.create(server.accountId, { label: 'star', scopes: ['*'] })).secret;
    expect((await call(server, 'GET', `${base}/api-keys`, { key })).status).to.equal(200);
    expect((await call(server, 'GET', `${base}/members`, { key })).status).to.equal(200);
  });

  it('lets any valid key ping, whatever its scopes', async () => {
    const key = await keyWith(['domains:read']);
    expect((await call(server, 'GET', '/v2/ping', { key })).status).to.equal(200);
  });

  it('makes removing a member need accounts:members:remove', async () => {
    const member = await call(server, 'POST', `${base}/members`, { body: { email: 'rm@example.com', role: 'Analyst' } });
    const denied = await call(server, 'DELETE', `${base}/members/${member.body.user_id}`, { key: await keyWith(['accounts:members:add']) });
    expect(denied.status).to.equal(403);
    const allowed = await call(server, 'DELETE', `${base}/members/${member.body.user_id}`, { key: await keyWith(['accounts:members:remove']) });
    expect(allowed.status).to.equal(200);
  });

  it('makes deleting a key need api-keys:delete', async () => {
    const victim = await call(server, 'POST', `${base}/api-keys`, { body: { label: 'victim', scopes: ['accounts:read'] } });
    expect((await call(server, 'DELETE', `${base}/api-keys/${victim.body.id}`, { key: await keyWith(['api-keys:write']) })).status).to.equal(403);
    // The deleting key must also hold every scope of the key it deletes (accounts:read here).
    expect((await call(server, 'DELETE', `${base}/api-keys/${victim.body.id}`, { key: await keyWith(['api-keys:delete']) })).status).to.equal(403);
    expect((await call(server, 'DELETE', `${base}/api-keys/${victim.body.id}`, { key: await keyWith(['api-keys:delete', 'accounts:read']) })).status).to.equal(
      200,
    );
  });

  it('refuses with 403 to grant a scope the calling key does not hold', async () => {
    const limited = await keyWith(['api-keys:write', 'accounts:read']);
    const escalate = await call(server, 'POST', `${base}/api-keys`, {
      key: limited,
      body: { label: 'x', scopes: ['api-keys:write', 'api-keys:delete'] },
      operationId: 'createAPIKey',
    });
    expect(escalate.status).to.equal(403);
    expect(escalate.body.message).to.contain('api-keys:delete');
    const star = await call(server, 'POST', `${base}/api-keys`, { body: { label: 'x', scopes: ['*'] } });
    expect(star.status).to.equal(403);
    const subset = await call(server, 'POST', `${base}/api-keys`, { key: limited, body: { label: 'x', scopes: ['accounts:read'] } });
    expect(subset.status).to.equal(201);
  });

  it('refuses with 403 a key widening its own scopes, but lets it keep or drop what it has', async () => {
    const created = await call(server, 'POST', `${base}/api-keys`, { body: { label: 'self', scopes: ['api-keys:write', 'accounts:read'] } });
    const self = created.body.secret_key;
    const widen = await call(server, 'PUT', `${base}/api-keys/${created.body.id}`, {
      key: self,
      body: { scopes: ['api-keys:write', 'accounts:read', 'accounts:write'] },
      operationId: 'updateAPIKey',
    });
    expect(widen.status).to.equal(403);
    const narrow = await call(server, 'PUT', `${base}/api-keys/${created.body.id}`, {
      key: self,
      body: { scopes: ['api-keys:write'] },
      operationId: 'updateAPIKey',
    });
    expect(narrow.status).to.equal(200);
  });

  it('guards getAPIKey and updateAPIKey with api-keys:read and api-keys:write', async () => {
    const target = (await call(server, 'POST', `${base}/api-keys`, { body: { label: 't', scopes: ['accounts:read'] } })).body.id;
    expect((await call(server, 'GET', `${base}/api-keys/${target}`, { key: await keyWith(['api-keys:write']) })).status).to.equal(403);
    expect((await call(server, 'GET', `${base}/api-keys/${target}`, { key: await keyWith(['api-keys:read']) })).status).to.equal(200);
    expect((await call(server, 'PUT', `${base}/api-keys/${target}`, { key: await keyWith(['api-keys:read']), body: { label: 'u' } })).status).to.equal(403);
    expect(
      (await call(server, 'PUT', `${base}/api-keys/${target}`, { key: await keyWith(['api-keys:write', 'accounts:read']), body: { label: 'u' } })).status,
    ).to.equal(200);
  });
});
