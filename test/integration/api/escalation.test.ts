import { expect } from 'chai';
import { fingerprint } from '../../../src/api/idempotency-policy.ts';
import { call, ManualClock, startServer, type CallOptions, type TestServer } from '../../helpers/harness.ts';

/**
 * Review findings 1, 9 and 10: a narrower key must never get what a stronger one has, through an
 * idempotent replay, an allow list that covers everything in pieces, or by rewriting the stronger
 * key. Rule for replays: a stored response goes to the key that made the request only, and only
 * while it holds the scopes it held then; anyone else with the same Idempotency-Key gets 422.
 */
describe('privilege escalation between keys of one account', () => {
  let server: TestServer;
  let account: string;

  before(async () => {
    server = await startServer({ clock: new ManualClock() });
    account = `/v2/accounts/${server.accountId}`;
    for (const domain of ['example.com', 'example.org']) {
      expect((await call(server, 'POST', `${account}/domains`, { body: { domain } })).status).to.equal(201);
    }
  });
  after(async () => server.stop());

  const api = (method: string, path: string, options?: CallOptions) => call(server, method, path, options);

  async function key(scopes: string[], label = 'narrow'): Promise<{ id: string; secret: string }> {
    const res = await api('POST', `${account}/api-keys`, { body: { label, scopes } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return { id: res.body.id, secret: res.body.secret_key };
  }

  describe('idempotent replays', () => {
    it("does not hand the administrator's new key to a key holding only api-keys:write (it gets 422 and no secret)", async () => {
      const narrow = await key(['api-keys:write']);
      const body = { label: 'deploy', scopes: ['domains:read', 'messages:send:all'] };
      const headers = { 'idempotency-key': 'create-deploy-key' };
      const first = await api('POST', `${account}/api-keys`, { body, headers });
      expect(first.status).to.equal(201);
      // Made directly, the narrow key's request is refused…
      expect((await api('POST', `${account}/api-keys`, { key: narrow.secret, body })).status).to.equal(403);
      // …and a replay of the administrator's gives nothing away.
      const replay = await api('POST', `${account}/api-keys`, { key: narrow.secret, body, headers });
      expect(replay.status).to.equal(422);
      expect(replay.body).to.deep.equal({ message: 'idempotency key was already used by another API key' });
      expect(replay.headers.get('idempotent-replayed')).to.equal(null);
      expect(JSON.stringify(replay.body)).to.not.include('aha-sk-');
      // The key that made it still gets its replay.
      const own = await api('POST', `${account}/api-keys`, { body, headers });
      expect(own.status).to.equal(201);
      expect(own.headers.get('idempotent-replayed')).to.equal('true');
      expect(own.body.secret_key).to.equal(first.body.secret_key);
    });

    it("does not hand a global SMTP credential's password to a key scoped to one domain", async () => {
      const scoped = await key(['smtp-credentials:write:{example.com}']);
      const body = { name: 'app', scope: 'global' };
      const headers = { 'idempotency-key': 'smtp-global' };
      const first = await api('POST', `${account}/smtp-credentials`, { body, headers });
      expect(first.status, JSON.stringify(first.body)).to.equal(201);
      expect(first.body.password).to.be.a('string');
      expect((await api('POST', `${account}/smtp-credentials`, { key: scoped.secret, body })).status).to.equal(403);
      const replay = await api('POST', `${account}/smtp-credentials`, { key: scoped.secret, body, headers });
      expect(replay.status).to.equal(422);
      expect(JSON.stringify(replay.body)).to.not.include(first.body.password);
    });

    it("replays an ordinary create (a domain) to its own key only, and not once that key's scopes changed", async () => {
      const writer = await key(['domains:write', 'domains:read', 'api-keys:write'], 'writer');
      const other = await key(['domains:write', 'domains:read'], 'other');
      const body = { domain: 'replayed.example' };
      const headers = { 'idempotency-key': 'domain-once' };
      expect((await api('POST', `${account}/domains`, { key: writer.secret, body, headers })).status).to.equal(201);
      const again = await api('POST', `${account}/domains`, { key: writer.secret, body, headers });
      expect(again.status).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      const foreign = await api('POST', `${account}/domains`, { key: other.secret, body, headers });
      expect(foreign.status).to.equal(422);
      expect(foreign.body.message).to.equal('idempotency key was already used by another API key');
      // The same key, narrowed since: the stored answer is no longer its to see.
      const narrowed = await api('PUT', `${account}/api-keys/${writer.id}`, { key: writer.secret, body: { scopes: ['domains:write', 'api-keys:write'] } });
      expect(narrowed.status, JSON.stringify(narrowed.body)).to.equal(200);
      const after = await api('POST', `${account}/domains`, { key: writer.secret, body, headers });
      expect(after.status).to.equal(422);
      expect(after.body.message).to.equal('idempotency key was already used by this API key with other scopes');
    });

    it('tells another key nothing of a request still in progress: 422, not the 409 of the key that made it', async () => {
      const other = await key(['messages:send:all'], 'sender');
      // A key claimed by the administrator, left in progress (a lease), as after a crash mid-request.
      const { core } = server.daemon;
      const adminKey = (await core.apiKeys.list(server.accountId, { limit: 100 })).items.find((k) => k.label !== 'narrow' && k.scopes.length > 10)!;
      expect(adminKey).to.not.equal(undefined);
      const repo = (core.idempotency as unknown as { repo: { save(r: unknown, e?: unknown): Promise<void> } }).repo;
      await repo.save({
        v: 1,
        accountId: server.accountId,
        key: 'in-flight',
        // The very request the other key sends: only the owner check can tell them apart.
        fingerprint: fingerprint('POST', `${account}/messages`.toLowerCase(), Buffer.from('{}')),
        state: 'in_progress',
        expiresAt: server.daemon.core.clock.now() + 60_000,
        response: null,
        owner: { keyId: adminKey.id, scopes: 'whatever' },
      });
      const res = await api('POST', `${account}/messages`, { key: other.secret, body: {}, headers: { 'idempotency-key': 'in-flight' } });
      expect(res.status).to.equal(422);
      expect(res.headers.get('retry-after')).to.equal(null);
    });
  });

  describe('allow lists', () => {
    for (const list of [
      ['0.0.0.0/1', '128.0.0.0/1'],
      ['::/1', '8000::/1'],
    ]) {
      it(`refuses ${list.join(' + ')} at create and update`, async () => {
        const created = await api('POST', `${account}/api-keys`, { body: { label: 'x', scopes: ['domains:read'], ip_allow_list: list } });
        expect(created.status).to.equal(400);
        expect(created.body.message).to.match(/together allow every IPv[46] address/);
        const target = await key(['domains:read'], 'target');
        const updated = await api('PUT', `${account}/api-keys/${target.id}`, { body: { ip_allow_list: list } });
        expect(updated.status).to.equal(400);
      });
    }
  });

  describe('a weaker key and a stronger one', () => {
    it('may not clear the allow list of, rename or delete a key holding scopes it lacks; 403 and nothing changed', async () => {
      const strong = await api('POST', `${account}/api-keys`, {
        body: { label: 'strong', scopes: ['domains:read', 'domains:write', 'api-keys:read'], ip_allow_list: ['127.0.0.1'] },
      });
      expect(strong.status).to.equal(201);
      const weak = await key(['api-keys:write', 'api-keys:delete', 'api-keys:read', 'domains:read'], 'weak');
      const cleared = await api('PUT', `${account}/api-keys/${strong.body.id}`, { key: weak.secret, body: { ip_allow_list: [] } });
      expect(cleared.status).to.equal(403);
      expect(cleared.body.message).to.equal(`API key ${strong.body.id} holds scopes the calling key does not hold ("domains:write")`);
      expect((await api('PUT', `${account}/api-keys/${strong.body.id}`, { key: weak.secret, body: { label: 'mine now' } })).status).to.equal(403);
      expect((await api('DELETE', `${account}/api-keys/${strong.body.id}`, { key: weak.secret })).status).to.equal(403);
      const unchanged = await api('GET', `${account}/api-keys/${strong.body.id}`);
      expect(unchanged.body.label).to.equal('strong');
      expect(unchanged.body.ip_allow_list).to.deep.equal(['127.0.0.1/32']);
      // A key it covers, it may manage; and the administrator may manage both.
      const covered = await key(['domains:read'], 'covered');
      expect((await api('PUT', `${account}/api-keys/${covered.id}`, { key: weak.secret, body: { label: 'renamed' } })).status).to.equal(200);
      expect((await api('DELETE', `${account}/api-keys/${covered.id}`, { key: weak.secret })).status).to.equal(200);
      expect((await api('DELETE', `${account}/api-keys/${strong.body.id}`)).status).to.equal(200);
    });

    it('lets a key rename itself', async () => {
      const self = await key(['api-keys:write'], 'self');
      const res = await api('PUT', `${account}/api-keys/${self.id}`, { key: self.secret, body: { label: 'self 2' } });
      expect(res.status).to.equal(200);
    });
  });
});
