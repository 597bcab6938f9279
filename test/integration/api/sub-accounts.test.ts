import { expect } from 'chai';
import { EVERY_GLOBAL_SCOPE } from '../../../src/accounts/scopes.ts';
import { call, startServer, type CallOptions, type TestServer } from '../../helpers/harness.ts';

/** The tests call many operations in a row on a clock that stands still. */
const FAST = { api: { rate_limits: { general: { per_second: 1000, burst: 100_000 } } } };

describe('sub accounts (reference-api §10)', function () {
  this.timeout(30_000);
  let server: TestServer;
  let parent: string;
  const api = (method: string, path: string, options?: CallOptions) => call(server, method, path, options);

  before(async () => {
    server = await startServer({ config: FAST });
    parent = `/v2/accounts/${server.accountId}/sub-accounts`;
  });
  after(async () => {
    await server.stop();
  });

  async function child(name = 'Acme', extra: Record<string, unknown> = {}): Promise<{ id: string; body: Record<string, unknown> }> {
    const res = await api('POST', parent, { body: { name, website: 'acme.example.com', ...extra } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return { id: res.body.id, body: res.body };
  }

  async function childKey(
    childId: string,
    scopes = ['accounts:read', 'domains:read', 'domains:write', 'api-keys:read', 'api-keys:write', 'accounts:members:add'],
  ): Promise<string> {
    const res = await api('POST', `${parent}/${childId}/api-keys`, { body: { label: 'child', scopes } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.secret_key;
  }

  /** Another top-level account with an all-powerful key, and one sub account of its own. */
  async function sibling(): Promise<{ id: string; key: string; childId: string }> {
    const core = server.daemon.core;
    const account = await core.accounts.create({ name: 'Other', website: 'https://other.example', ownerEmail: 'owner@other.example' });
    const { secret } = await core.apiKeys.create(account.id, { label: 'other admin', scopes: EVERY_GLOBAL_SCOPE });
    const res = await call({ url: server.url, adminKey: secret }, 'POST', `/v2/accounts/${account.id}/sub-accounts`, {
      body: { name: 'Theirs', website: 'theirs.example' },
    });
    expect(res.status).to.equal(201);
    return { id: account.id, key: secret, childId: res.body.id };
  }

  it('bootstraps a sub account: create (Idempotency-Key A), its key (Idempotency-Key B), and the key works on the ordinary routes with the child id', async () => {
    const created = await api('POST', parent, {
      body: { name: '  Acme Subsidiary ', website: 'https://acme.example.com/home', monthly_credit: 0 },
      headers: { 'idempotency-key': 'A-1' },
    });
    expect(created.status).to.equal(201);
    expect(created.body).to.include({
      object: 'sub_account',
      parent_account_id: server.accountId,
      name: 'Acme Subsidiary',
      website: 'acme.example.com',
      status: 'active',
      monthly_credit: 0,
      domain_count: 0,
      member_count: 0,
      last_activity_at: null,
    });
    const replay = await api('POST', parent, {
      body: { name: '  Acme Subsidiary ', website: 'https://acme.example.com/home', monthly_credit: 0 },
      headers: { 'idempotency-key': 'A-1' },
    });
    expect(replay.status).to.equal(201);
    expect(replay.body.id).to.equal(created.body.id);

    const keyBody = { label: 'child admin', scopes: ['accounts:read', 'domains:write', 'domains:read'] };
    const key = await api('POST', `${parent}/${created.body.id}/api-keys`, { body: keyBody, headers: { 'idempotency-key': 'B-1' } });
    expect(key.status).to.equal(201);
    expect(key.body.account_id).to.equal(created.body.id);
    expect(key.body.secret_key).to.match(/^aha-sk-/);
    const keyReplay = await api('POST', `${parent}/${created.body.id}/api-keys`, { body: keyBody, headers: { 'idempotency-key': 'B-1' } });
    expect(keyReplay.body.id).to.equal(key.body.id);

    const mine = await call({ url: server.url, adminKey: key.body.secret_key }, 'GET', `/v2/accounts/${created.body.id}`);
    expect(mine.status).to.equal(200);
    expect(mine.body).to.include({ id: created.body.id, parent_account_id: server.accountId });
    const domain = await call({ url: server.url, adminKey: key.body.secret_key }, 'POST', `/v2/accounts/${created.body.id}/domains`, {
      body: { domain: 'mail.acme.example.com' },
    });
    expect(domain.status).to.equal(201);
    const got = await api('GET', `${parent}/${created.body.id}`);
    expect(got.body.domain_count).to.equal(1);

    // The key is never shown again.
    const listed = await api('GET', `${parent}/${created.body.id}/api-keys`);
    expect(listed.body.data).to.have.length(1);
    expect(listed.body.data[0]).to.not.have.property('secret_key');
    expect((await api('GET', `${parent}/${created.body.id}/api-keys/${key.body.id}`)).body).to.not.have.property('secret_key');
  });

  it('lets nothing cross an account boundary except what the contract grants the parent', async () => {
    const mine = await child('Matrix');
    const childSecret = await childKey(mine.id, [...EVERY_GLOBAL_SCOPE.filter((s) => !s.startsWith('sub-account'))]);
    const other = await sibling();
    const keyRes = await api('POST', `${parent}/${mine.id}/api-keys`, { body: { label: 'victim', scopes: ['accounts:read'] } });
    const keyId = keyRes.body.id as string;
    const childAccount = `/v2/accounts/${mine.id}/sub-accounts`;
    const otherBase = `/v2/accounts/${other.id}/sub-accounts`;
    const ops: Array<[string, (base: string, sub: string) => string, unknown?]> = [
      ['GET', (b) => b],
      ['POST', (b) => b, { name: 'x', website: 'x.example' }],
      ['GET', (b) => `${b}/usage`],
      ['GET', (b, s) => `${b}/${s}`],
      ['PUT', (b, s) => `${b}/${s}`, { name: 'renamed' }],
      ['POST', (b, s) => `${b}/${s}/suspend`, { reason: 'test' }],
      ['POST', (b, s) => `${b}/${s}/unsuspend`],
      ['GET', (b, s) => `${b}/${s}/api-keys`],
      ['POST', (b, s) => `${b}/${s}/api-keys`, { label: 'x', scopes: ['accounts:read'] }],
      ['GET', (b, s) => `${b}/${s}/api-keys/${keyId}`],
      ['PUT', (b, s) => `${b}/${s}/api-keys/${keyId}`, { label: 'renamed' }],
      ['DELETE', (b, s) => `${b}/${s}/api-keys/${keyId}`],
      ['DELETE', (b, s) => `${b}/${s}`],
    ];
    for (const [method, path, body] of ops) {
      const options = (key: string): CallOptions => ({ key, ...(body !== undefined ? { body } : {}) });
      // The child's key on its own id: a sub account has no sub accounts (its keys hold no such scope).
      const asChild = await api(method, path(childAccount, mine.id), options(childSecret));
      expect(asChild.status, `child ${method} ${path(childAccount, mine.id)}`).to.equal(403);
      // The child's key on its parent's id: not its account.
      const upward = await api(method, path(parent, mine.id), options(childSecret));
      expect(upward.status, `child on parent ${method} ${path(parent, mine.id)}`).to.equal(401);
      // Another parent naming our sub account under its own id: not found (not a 403 that confirms it exists).
      const sideways = await api(method, path(otherBase, mine.id), options(other.key));
      if (!path(otherBase, mine.id).endsWith('/sub-accounts') && !path(otherBase, mine.id).endsWith('/usage')) {
        expect(sideways.status, `sibling ${method} ${path(otherBase, mine.id)}`).to.equal(404);
      }
      // Our parent naming the other parent's sub account: not found either.
      const across = await api(method, path(parent, other.childId), options(server.adminKey));
      if (!path(parent, other.childId).endsWith('/sub-accounts') && !path(parent, other.childId).endsWith('/usage')) {
        expect(across.status, `parent on a stranger ${method} ${path(parent, other.childId)}`).to.equal(404);
      }
    }
    // The other parent's list and usage never show our sub accounts.
    const theirs = await call({ url: server.url, adminKey: other.key }, 'GET', otherBase);
    const theirIds = theirs.body.data.map((s: { id: string }) => s.id);
    expect(theirIds).to.include(other.childId).and.not.include(mine.id);
    const usage = await call({ url: server.url, adminKey: other.key }, 'GET', `${otherBase}/usage`);
    expect(usage.body.sub_accounts.map((s: { account_id: string }) => s.account_id)).to.have.members(theirIds);
    expect(usage.body.parent.account_id).to.equal(other.id);
    // The parent's own key is not a key of the child: it cannot use the child's ordinary routes.
    expect((await api('GET', `/v2/accounts/${mine.id}`)).status).to.equal(401);
    // Nor of a sibling's: another sub account's id is not its account.
    const sister = await child('Sister');
    expect((await api('GET', `/v2/accounts/${sister.id}`, { key: childSecret })).status).to.equal(401);
    expect((await api('GET', `/v2/accounts/${sister.id}/api-keys`, { key: childSecret })).status).to.equal(401);
    // The child's keys see nothing of its parent's keys or resources.
    expect((await api('GET', `/v2/accounts/${server.accountId}/api-keys`, { key: childSecret })).status).to.equal(401);
    const ownKeys = await api('GET', `/v2/accounts/${mine.id}/api-keys`, { key: childSecret });
    expect(ownKeys.status).to.equal(200);
    expect(ownKeys.body.data.every((k: { account_id: string }) => k.account_id === mine.id)).to.equal(true);
  });

  it('gates each operation on its scope: a parent key without it gets 403', async () => {
    const mine = await child('Scoped');
    const readOnly = await api('POST', `/v2/accounts/${server.accountId}/api-keys`, {
      body: { label: 'ro', scopes: ['sub-accounts:read', 'sub-account-api-keys:read'] },
    });
    const key = readOnly.body.secret_key as string;
    expect((await api('GET', parent, { key })).status).to.equal(200);
    expect((await api('GET', `${parent}/${mine.id}`, { key })).status).to.equal(200);
    expect((await api('GET', `${parent}/${mine.id}/api-keys`, { key })).status).to.equal(200);
    for (const [method, path, body] of [
      ['POST', parent, { name: 'x', website: 'x.example' }],
      ['PUT', `${parent}/${mine.id}`, { name: 'y' }],
      ['DELETE', `${parent}/${mine.id}`, undefined],
      ['POST', `${parent}/${mine.id}/suspend`, { reason: 'r' }],
      ['POST', `${parent}/${mine.id}/unsuspend`, undefined],
      ['GET', `${parent}/usage`, undefined],
      ['POST', `${parent}/${mine.id}/api-keys`, { label: 'k', scopes: ['accounts:read'] }],
    ] as const) {
      const res = await api(method, path, { key, ...(body ? { body } : {}) });
      expect(res.status, `${method} ${path}`).to.equal(403);
      expect(res.body.message).to.equal('Insufficient permissions for the required scope');
    }
  });

  it('refuses bad input with 400 and a message, and unknown ids with 404', async () => {
    const mine = await child('Inputs');
    for (const body of [
      {},
      { name: '   ', website: 'a.example' },
      { name: 'x'.repeat(256), website: 'a.example' },
      { name: 'ok', website: 'not a domain' },
      { name: 'ok', website: 'localhost' },
      { name: 'ok', website: 'ftp://a.example' },
      { name: 'ok', website: 'a.example', monthly_credit: -1 },
      { name: 'ok', website: 'a.example', monthly_credit: 1.5 },
      { name: 'ok', website: 'a.example', monthly_credit: 1_000_000_001 },
      { name: 'ok', website: 'a.example', extra: true },
      { name: 'bad\u0000name', website: 'a.example' },
    ]) {
      const res = await api('POST', parent, { body });
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.message).to.be.a('string').and.not.equal('');
    }
    for (const body of [{}, { name: null }, { name: 'Inputs' }, { monthly_credit: 0 }, { website: '' }]) {
      const res = await api('PUT', `${parent}/${mine.id}`, { body });
      expect(res.status, JSON.stringify(body)).to.equal(400);
    }
    for (const body of [{}, { reason: '' }, { reason: 'x'.repeat(501) }, { reason: 5 }, { reason: '   ' }]) {
      const res = await api('POST', `${parent}/${mine.id}/suspend`, { body });
      expect(res.status, JSON.stringify(body)).to.equal(400);
    }
    expect((await api('GET', `${parent}/not-a-uuid`)).status).to.equal(400);
    expect((await api('GET', `${parent}/0190a8a4-0000-7000-8000-000000000000`)).status).to.equal(404);
    expect((await api('GET', `${parent}/${server.accountId}`)).status).to.equal(404);
    expect((await api('GET', `${parent}/${mine.id}/api-keys/0190a8a4-0000-7000-8000-000000000000`)).status).to.equal(404);
    // A child key never gets a sub-account scope, and the parent's key cannot give it one.
    const refused = await api('POST', `${parent}/${mine.id}/api-keys`, { body: { label: 'k', scopes: ['sub-accounts:read'] } });
    expect(refused.status).to.equal(400);
    expect(refused.body.message).to.contain('sub-accounts:read');
    const plain = await api('POST', `${parent}/${mine.id}/api-keys`, { body: { label: 'k', scopes: ['accounts:read'] } });
    const widened = await api('PUT', `${parent}/${mine.id}/api-keys/${plain.body.id}`, { body: { scopes: ['accounts:read', 'sub-account-api-keys:write'] } });
    expect(widened.status).to.equal(400);
    expect(widened.body.message).to.contain('sub-account-api-keys:write');
    expect((await api('GET', `${parent}/${mine.id}/api-keys/${plain.body.id}`)).body.scopes.map((s: { scope: string }) => s.scope)).to.deep.equal([
      'accounts:read',
    ]);
    // Scopes are validated against the child: a domain of the parent is not one of the child's.
    const foreign = await api('POST', `${parent}/${mine.id}/api-keys`, { body: { label: 'k', scopes: ['messages:send:{parent.example}'] } });
    expect(foreign.status).to.equal(400);
  });

  it('updates name, website and monthly credit, and lists page by page without deleted ones', async () => {
    const mine = await child('Before');
    const res = await api('PUT', `${parent}/${mine.id}`, { body: { name: 'After', website: 'after.example', monthly_credit: 50_000 } });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ name: 'After', website: 'after.example', monthly_credit: 50_000 });
    const nulls = await api('PUT', `${parent}/${mine.id}`, { body: { name: null, website: null, monthly_credit: 10 } });
    expect(nulls.body).to.include({ name: 'After', monthly_credit: 10 });

    const all: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await api('GET', `${parent}?limit=2${cursor ? `&after=${cursor}` : ''}`);
      expect(page.status).to.equal(200);
      all.push(...page.body.data.map((s: { id: string }) => s.id));
      if (!page.body.pagination.has_more) break;
      cursor = page.body.pagination.next_cursor;
    }
    expect(all).to.include(mine.id);
    expect(new Set(all).size).to.equal(all.length);
  });

  it('suspends and unsuspends a sub account: its keys get 401 while suspended, then work again', async () => {
    const mine = await child('Pausable');
    const secret = await childKey(mine.id);
    const suspended = await api('POST', `${parent}/${mine.id}/suspend`, { body: { reason: 'unpaid invoice' } });
    expect(suspended.status).to.equal(200);
    expect(suspended.body.status).to.equal('suspended');
    const refused = await api('GET', `/v2/accounts/${mine.id}`, { key: secret });
    expect(refused.status).to.equal(401);
    expect(refused.body.message).to.equal('Account is suspended');
    expect((await api('POST', `${parent}/${mine.id}/suspend`, { body: { reason: 'again' } })).status).to.equal(409);
    // The parent still manages it: its keys, its details.
    expect((await api('GET', `${parent}/${mine.id}/api-keys`)).status).to.equal(200);
    const back = await api('POST', `${parent}/${mine.id}/unsuspend`);
    expect(back.status).to.equal(200);
    expect(back.body.status).to.equal('active');
    expect((await api('GET', `/v2/accounts/${mine.id}`, { key: secret })).status).to.equal(200);
    expect((await api('POST', `${parent}/${mine.id}/unsuspend`)).status).to.equal(409);
  });

  it('soft-deletes: gone from the list, readable as deleted, its keys refused at once, nothing more changes', async () => {
    const mine = await child('Doomed');
    const secret = await childKey(mine.id);
    const res = await api('DELETE', `${parent}/${mine.id}`);
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ message: 'sub account deleted' });
    const list = await api('GET', `${parent}?limit=100`);
    expect(list.body.data.map((s: { id: string }) => s.id)).to.not.include(mine.id);
    expect((await api('GET', `${parent}/${mine.id}`)).body.status).to.equal('deleted');
    const refused = await api('GET', `/v2/accounts/${mine.id}`, { key: secret });
    expect(refused.status).to.equal(401);
    expect(refused.body.message).to.equal('Account has been deleted');
    for (const [method, path, body] of [
      ['DELETE', `${parent}/${mine.id}`, undefined],
      ['PUT', `${parent}/${mine.id}`, { name: 'zombie' }],
      ['POST', `${parent}/${mine.id}/suspend`, { reason: 'r' }],
      ['POST', `${parent}/${mine.id}/unsuspend`, undefined],
      ['POST', `${parent}/${mine.id}/api-keys`, { label: 'k', scopes: ['accounts:read'] }],
    ] as const) {
      const r = await api(method, path, body ? { body } : {});
      expect(r.status, `${method} ${path}`).to.equal(409);
    }
    // Its data is kept.
    expect(await server.daemon.core.accountsRepo.getAccount(mine.id)).to.include({ status: 'deleted' });
  });

  it('cascades a parent suspension: active sub accounts follow and come back; one suspended in its own right stays', async () => {
    const core = server.daemon.core;
    const follower = await child('Follower');
    const own = await child('Own');
    const secret = await childKey(follower.id);
    expect((await api('POST', `${parent}/${own.id}/suspend`, { body: { reason: 'own reason' } })).status).to.equal(200);
    await core.accountStatuses.suspend(server.accountId, 'abuse report', 'operator');
    try {
      expect((await core.accountsRepo.getAccount(follower.id))!.status).to.equal('parent-suspended');
      expect((await core.accountsRepo.getAccount(own.id))!.status).to.equal('suspended');
      const refused = await api('GET', `/v2/accounts/${follower.id}`, { key: secret });
      expect(refused.status).to.equal(401);
      expect(refused.body.message).to.equal('Account is suspended');
      expect((await api('GET', parent)).body.message).to.equal('Account is suspended');
    } finally {
      await core.accountStatuses.unsuspend(server.accountId, 'operator');
    }
    expect((await api('GET', `${parent}/${follower.id}`)).body.status).to.equal('active');
    expect((await api('GET', `${parent}/${own.id}`)).body.status).to.equal('suspended');
    expect((await api('GET', `/v2/accounts/${follower.id}`, { key: secret })).status).to.equal(200);
    // A sub account the operator suspended is not the parent's to unsuspend.
    await core.accountStatuses.suspend(follower.id, 'operator hold', 'operator');
    const denied = await api('POST', `${parent}/${follower.id}/unsuspend`);
    expect(denied.status).to.equal(403);
    expect(denied.body.message).to.contain('operator');
    await core.accountStatuses.unsuspend(follower.id, 'operator');
  });

  it("has no self-lockout guard when the parent narrows a child key's allow list", async () => {
    const mine = await child('Locked');
    const created = await api('POST', `${parent}/${mine.id}/api-keys`, { body: { label: 'k', scopes: ['accounts:read', 'api-keys:write'] } });
    const res = await api('PUT', `${parent}/${mine.id}/api-keys/${created.body.id}`, { body: { ip_allow_list: ['192.0.2.1'] } });
    expect(res.status).to.equal(200);
    expect(res.body.ip_allow_list).to.deep.equal(['192.0.2.1/32']);
    expect((await api('GET', `/v2/accounts/${mine.id}`, { key: created.body.secret_key })).status).to.equal(403);
    // The child's own key narrowing itself is refused (409), as for any account.
    const own = await api('POST', `${parent}/${mine.id}/api-keys`, { body: { label: 'self', scopes: ['accounts:read', 'api-keys:write', 'api-keys:read'] } });
    const self = await api('PUT', `/v2/accounts/${mine.id}/api-keys/${own.body.id}`, { key: own.body.secret_key, body: { ip_allow_list: ['192.0.2.1'] } });
    expect(self.status).to.equal(409);
    // A child key cannot give any key a sub-account scope either.
    const escalate = await api('POST', `/v2/accounts/${mine.id}/api-keys`, { key: own.body.secret_key, body: { label: 'x', scopes: ['sub-accounts:read'] } });
    expect(escalate.status).to.equal(403);
    // The parent deletes the child's key.
    expect((await api('DELETE', `${parent}/${mine.id}/api-keys/${own.body.id}`)).status).to.equal(200);
    expect((await api('GET', `/v2/accounts/${mine.id}`, { key: own.body.secret_key })).status).to.equal(401);
  });

  it('counts direct members', async () => {
    const mine = await child('Team');
    const secret = await childKey(mine.id);
    const added = await api('POST', `/v2/accounts/${mine.id}/members`, { key: secret, body: { email: 'dev@acme.example', role: 'Developer' } });
    expect(added.status, JSON.stringify(added.body)).to.equal(201);
    expect((await api('GET', `${parent}/${mine.id}`)).body.member_count).to.equal(1);
  });
});
