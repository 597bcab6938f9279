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
    for (const body of [
      { label: 'nul\u0000byte', scopes: ['api-keys:read'] },
      { label: 'rtl\u202Eevil', scopes: ['api-keys:read'] },
      { label: '', scopes: ['api-keys:read'] },
      { label: 'x'.repeat(256), scopes: ['api-keys:read'] },
      { label: 'x', scopes: [] },
      { scopes: ['api-keys:read'] },
      { label: 'x' },
    ]) {
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

  it("never shows or touches another account's keys", async () => {
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

  describe('allow lists whose entries together allow every address', () => {
    /** Every IPv6 block but ::ffff:0:0/96, one per prefix length: IPv6 clients never have those addresses. */
    const everyIpv6ClientAddress = Array.from({ length: 96 }, (_, i) => {
      const mapped = 0xffffn << 32n;
      const sibling = ((mapped >> BigInt(127 - i)) ^ 1n) << BigInt(127 - i);
      const hextets = Array.from({ length: 8 }, (_, h) => ((sibling >> BigInt(16 * (7 - h))) & 0xffffn).toString(16));
      return `${hextets.join(':')}/${i + 1}`;
    });
    const cases: Array<[string, string[], RegExp]> = [
      ['four IPv4 /2s', ['0.0.0.0/2', '64.0.0.0/2', '128.0.0.0/2', '192.0.0.0/2'], /^ip_allow_list: its entries together allow every IPv4 address$/],
      ['IPv6 halves of unequal size, out of order', ['8000::/1', '::/2', '4000::/2'], /^ip_allow_list: its entries together allow every IPv6 address$/],
      ['the IPv4 halves written IPv4-mapped', ['::ffff:0.0.0.0/97', '::ffff:128.0.0.0/97'], /^ip_allow_list: its entries together allow every IPv4 address$/],
      ['all IPv4 as ::ffff:0:0/96', ['::ffff:0:0/96'], /^ip_allow_list: "::ffff:0:0\/96" would allow every address$/],
      ['all IPv6 but the IPv4-mapped block', everyIpv6ClientAddress, /^ip_allow_list: its entries together allow every IPv6 address$/],
    ];
    for (const [name, list, message] of cases) {
      it(`refuses ${name} with 400, at create and at update, changing nothing`, async () => {
        const before = (await call(server, 'GET', `${base}?limit=100`)).body.data.length;
        const created = await create({ label: 'everyone', scopes: ['api-keys:read'], ip_allow_list: list });
        expect(created.status).to.equal(400);
        expect(created.body.message).to.match(message);
        expect((await call(server, 'GET', `${base}?limit=100`)).body.data).to.have.length(before);
        const id = (await create({ label: 'narrowed', scopes: ['api-keys:read'], ip_allow_list: ['10.0.0.0/8'] })).body.id;
        const updated = await call(server, 'PUT', `${base}/${id}`, { body: { ip_allow_list: list }, operationId: 'updateAPIKey' });
        expect(updated.status).to.equal(400);
        expect(updated.body.message).to.match(message);
        expect((await call(server, 'GET', `${base}/${id}`)).body.ip_allow_list).to.deep.equal(['10.0.0.0/8']);
      });
    }

    it('accepts a list that leaves some addresses out', async () => {
      const list = ['0.0.0.0/1', '128.0.0.0/2', '192.0.0.0/3', '224.0.0.0/4', '240.0.0.0/5', '248.0.0.0/6', '252.0.0.0/7', '254.0.0.0/8', '255.0.0.0/9'];
      expect((await create({ label: 'most', scopes: ['api-keys:read'], ip_allow_list: list })).status).to.equal(201);
    });
  });

  describe('a key manages only keys whose every scope it holds', () => {
    const keyWith = async (scopes: string[], label = scopes.join(' ')) => {
      const res = await create({ label, scopes });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      return { id: res.body.id as string, secret: res.body.secret_key as string };
    };
    const put = (id: string, body: object, key: string) => call(server, 'PUT', `${base}/${id}`, { body, key, operationId: 'updateAPIKey' });
    const del = (id: string, key: string) => call(server, 'DELETE', `${base}/${id}`, { key, operationId: 'deleteAPIKey' });

    it('refuses with 403 to change the label, scopes or allow list of a key holding a scope it lacks, and to delete it', async () => {
      const strong = (await create({ label: 'strong', scopes: ['messages:send:all', 'api-keys:read'], ip_allow_list: ['192.0.2.0/24'] })).body;
      const weak = await keyWith(['api-keys:write', 'api-keys:delete', 'api-keys:read', 'messages:send:{example.com}']);
      const message = `API key ${strong.id} holds scopes the calling key does not hold ("messages:send:all")`;
      for (const body of [{ label: 'taken' }, { scopes: ['api-keys:read'] }, { ip_allow_list: [] }, { ip_allow_list: ['127.0.0.1'] }]) {
        const res = await put(strong.id, body, weak.secret);
        expect(res.status, JSON.stringify(body)).to.equal(403);
        expect(res.body).to.deep.equal({ message });
      }
      const deleted = await del(strong.id, weak.secret);
      expect(deleted.status).to.equal(403);
      expect(deleted.body).to.deep.equal({ message });
      const after = (await call(server, 'GET', `${base}/${strong.id}`)).body;
      expect(after).to.deep.include({ label: 'strong', ip_allow_list: ['192.0.2.0/24'], updated_at: strong.updated_at });
      expect(after.scopes.map((s: { scope: string }) => s.scope)).to.deep.equal(['messages:send:all', 'api-keys:read']);
      // Reading stays a matter of api-keys:read alone.
      expect((await call(server, 'GET', `${base}/${strong.id}`, { key: weak.secret })).status).to.equal(200);
      const listed = await call(server, 'GET', `${base}?limit=100`, { key: weak.secret });
      expect(listed.body.data.map((k: { id: string }) => k.id)).to.include(strong.id);
    });

    it('lets a key manage a key it covers: the same domain scope, or a domain scope under its :all', async () => {
      const manager = await keyWith(['api-keys:write', 'api-keys:delete', 'messages:send:all', 'messages:read:{example.com}']);
      const covered = await keyWith(['messages:send:{example.com}', 'messages:read:{example.com}']);
      expect((await put(covered.id, { label: 'covered 2' }, manager.secret)).status).to.equal(200);
      expect((await del(covered.id, manager.secret)).status).to.equal(200);
      const wider = await keyWith(['messages:read:all']);
      expect((await put(wider.id, { label: 'wider 2' }, manager.secret)).status).to.equal(403);
    });

    it('lets only a wildcard key manage a wildcard key, and a wildcard key manage any', async () => {
      const { core } = server.daemon;
      const wildcard = await core.apiKeys.create(server.accountId, { label: 'operator', scopes: ['*'] });
      // The bootstrap key holds every scope that names no domain, but not `*`.
      const refused = await call(server, 'PUT', `${base}/${wildcard.key.id}`, { body: { label: 'mine' }, operationId: 'updateAPIKey' });
      expect(refused.status).to.equal(403);
      expect(refused.body.message).to.equal(`API key ${wildcard.key.id} holds scopes the calling key does not hold ("*")`);
      expect((await call(server, 'DELETE', `${base}/${wildcard.key.id}`, { operationId: 'deleteAPIKey' })).status).to.equal(403);
      const target = await keyWith(['messages:send:all', 'domains:write', 'accounts:read'], 'target');
      expect((await put(target.id, { ip_allow_list: ['198.51.100.0/24'] }, wildcard.secret)).status).to.equal(200);
      expect((await del(target.id, wildcard.secret)).status).to.equal(200);
      expect((await del(wildcard.key.id, wildcard.secret)).status).to.equal(200);
    });
  });
});
