import { expect } from 'chai';
import { call, startServer, storeContains, type TestServer } from '../../helpers/harness.ts';

describe('API keys resource', () => {
  let server: TestServer;
  let base: string;
  let exampleId: string;
  before(async () => {
    server = await startServer();
    base = `/v2/accounts/${server.accountId}/api-keys`;
    const domain = await call(server, 'POST', `/v2/accounts/${server.accountId}/domains`, { body: { domain: 'example.com' } });
    expect(domain.status).to.equal(201);
    exampleId = domain.body.id;
  });
  after(async () => {
    await server.stop();
  });

  async function create(body: object, key?: string) {
    return call(server, 'POST', base, { body, operationId: 'createAPIKey', ...(key ? { key } : {}) });
  }

  it('creates a key and shows its secret only in the 201', async () => {
    const res = await create({ label: 'ci', scopes: ['api-keys:read', 'messages:send:all'], ip_allow_list: [] });
    expect(res.status).to.equal(201);
    expect(res.body.secret_key).to.match(/^aha-sk-[A-Za-z0-9]{64}$/);
    expect(res.body.public_key).to.match(/^aha-pk-[A-Za-z0-9]{64}$/);
    expect(res.body.scopes.map((s: { scope: string }) => s.scope)).to.deep.equal(['api-keys:read', 'messages:send:all']);
    expect(res.body.scopes[0].api_key_id).to.equal(res.body.id);
    expect(res.body.scopes[0].domain_id).to.equal(null);
    expect(res.body.ip_allow_list).to.deep.equal([]);
    expect(res.body.last_used_at).to.equal(null);

    const got = await call(server, 'GET', `${base}/${res.body.id}`, { operationId: 'getAPIKey' });
    expect(got.status).to.equal(200);
    expect(got.body).to.not.have.property('secret_key');
    const { secret_key: _secret, ...withoutSecret } = res.body;
    expect(got.body).to.deep.equal(withoutSecret);

    const list = await call(server, 'GET', base, { operationId: 'getAPIKeys' });
    for (const key of list.body.data) expect(key).to.not.have.property('secret_key');
  });

  it('authenticates with the new secret and records last_used_at', async () => {
    const res = await create({ label: 'used', scopes: ['api-keys:read'] });
    expect((await call(server, 'GET', '/v2/ping', { key: res.body.secret_key })).status).to.equal(200);
    const got = await call(server, 'GET', `${base}/${res.body.id}`);
    expect(got.body.last_used_at).to.be.a('string');
  });

  it('stores only a hash of the secret', async () => {
    const res = await create({ label: 'hashed', scopes: ['api-keys:read'] });
    await server.daemon.stop();
    expect(await storeContains(server, res.body.secret_key)).to.equal(false);
    expect(await storeContains(server, res.body.public_key), 'the scan sees stored keys').to.equal(true);
    server = await server.restart();
  });

  it('keeps domain scopes of owned domains with their domain_id', async () => {
    const res = await create({ label: 'domain', scopes: ['messages:send:{Example.COM.}'] });
    expect(res.status).to.equal(201);
    expect(res.body.scopes[0]).to.include({ scope: 'messages:send:{example.com}', domain_id: exampleId });
  });

  it('refuses a domain scope for a domain the account does not own', async () => {
    const res = await create({ label: 'domain', scopes: ['messages:send:{other.org}'] });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.contain('other.org');
  });

  it('refuses duplicate scopes and drops a domain scope made redundant by :all', async () => {
    expect((await create({ label: 'dup', scopes: ['api-keys:read', 'api-keys:read'] })).status).to.equal(400);
    const res = await create({ label: 'redundant', scopes: ['messages:read:{example.com}', 'messages:read:all'] });
    expect(res.status).to.equal(201);
    expect(res.body.scopes.map((s: { scope: string }) => s.scope)).to.deep.equal(['messages:read:all']);
  });

  it('validates label and scopes', async () => {
    for (const body of [{ label: 'nul\u0000byte', scopes: ['api-keys:read'] }, { label: 'rtl\u202Eevil', scopes: ['api-keys:read'] }, { label: '', scopes: ['api-keys:read'] }, { label: 'x'.repeat(256), scopes: ['api-keys:read'] }, { label: 'x', scopes: [] }, { scopes: ['api-keys:read'] }, { label: 'x' }]) {
      const res = await create(body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
    }
  });

  describe('update', () => {
    let id: string;
    beforeEach(async () => {
      id = (await create({ label: 'before', scopes: ['api-keys:read'], ip_allow_list: ['10.0.0.0/8'] })).body.id;
    });

    it('changes the label and keeps what is null or omitted', async () => {
      const res = await call(server, 'PUT', `${base}/${id}`, { body: { label: 'after', scopes: null }, operationId: 'updateAPIKey' });
      expect(res.status).to.equal(200);
      expect(res.body.label).to.equal('after');
      expect(res.body.scopes.map((s: { scope: string }) => s.scope)).to.deep.equal(['api-keys:read']);
      expect(res.body.ip_allow_list).to.deep.equal(['10.0.0.0/8']);
    });

    it('keeps the ids of scopes that stay and adds new ones', async () => {
      const before = (await call(server, 'GET', `${base}/${id}`)).body;
      const res = await call(server, 'PUT', `${base}/${id}`, { body: { scopes: ['api-keys:read', 'accounts:read'] }, operationId: 'updateAPIKey' });
      expect(res.body.scopes[0].id).to.equal(before.scopes[0].id);
      expect(res.body.scopes[1].scope).to.equal('accounts:read');
    });

    it('clears the allow list with an empty array', async () => {
      const res = await call(server, 'PUT', `${base}/${id}`, { body: { ip_allow_list: [] }, operationId: 'updateAPIKey' });
      expect(res.status).to.equal(200);
      expect(res.body.ip_allow_list).to.deep.equal([]);
    });

    it('answers 400 to an empty or no-op update', async () => {
      for (const body of [{}, { label: 'before' }, { scopes: ['api-keys:read'] }, { ip_allow_list: ['10.1.2.3/8'] }, { label: null }]) {
        const res = await call(server, 'PUT', `${base}/${id}`, { body, operationId: 'updateAPIKey' });
        expect(res.status, JSON.stringify(body)).to.equal(400);
      }
    });

    it('answers 404 for an unknown key', async () => {
      const res = await call(server, 'PUT', `${base}/01890a5d-ac96-774b-bcce-b302099a8057`, { body: { label: 'x' }, operationId: 'updateAPIKey' });
      expect(res.status).to.equal(404);
    });
  });

  it('deletes a key: 200, then 404', async () => {
    const id = (await create({ label: 'gone', scopes: ['api-keys:read'] })).body.id;
    expect((await call(server, 'DELETE', `${base}/${id}`, { operationId: 'deleteAPIKey' })).status).to.equal(200);
    expect((await call(server, 'DELETE', `${base}/${id}`, { operationId: 'deleteAPIKey' })).status).to.equal(404);
    expect((await call(server, 'GET', `${base}/${id}`, { operationId: 'getAPIKey' })).status).to.equal(404);
  });

  it('never shows or touches another account\'s keys', async () => {
    const { core } = server.daemon;
    const other = await core.accounts.create({ name: 'B', website: 'https://b.example', ownerEmail: 'owner@b.example' });
    const { key: otherKey, secret: otherSecret } = await core.apiKeys.create(other.id, { label: 'b', scopes: ['api-keys:read', 'api-keys:delete'] });
    // A's key, A's path, B's key id: not found.
    expect((await call(server, 'GET', `${base}/${otherKey.id}`)).status).to.equal(404);
    expect((await call(server, 'DELETE', `${base}/${otherKey.id}`)).status).to.equal(404);
    // A's key on B's path: refused.
    expect((await call(server, 'GET', `/v2/accounts/${other.id}/api-keys`)).status).to.equal(401);
    // B's key sees only B's keys.
    const list = await call(server, 'GET', `/v2/accounts/${other.id}/api-keys`, { key: otherSecret, operationId: 'getAPIKeys' });
    expect(list.body.data.map((k: { id: string }) => k.id)).to.deep.equal([otherKey.id]);
  });
});
