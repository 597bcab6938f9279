import { expect } from 'chai';
import type { IdempotencyRepo } from '../../../src/store/idempotency-repo.ts';
import { call, ManualClock, startServer, storeContains, type TestServer } from '../../helpers/harness.ts';

const MINUTE = 60_000;

describe('Idempotency-Key', () => {
  let server: TestServer;
  let clock: ManualClock;
  let keys: string;
  let members: string;
  let n = 0;
  const fresh = () => `key-${++n}-${Math.random()}`;

  beforeEach(async () => {
    clock = new ManualClock();
    server = await startServer({ clock });
    keys = `/v2/accounts/${server.accountId}/api-keys`;
    members = `/v2/accounts/${server.accountId}/members`;
  });
  afterEach(async () => {
    await server.stop();
  });

  const post = (path: string, body: object, idem: string, key?: string) =>
    call(server, 'POST', path, { body, headers: { 'idempotency-key': idem }, ...(key ? { key } : {}) });

  it('runs a first request without Idempotent-Replayed and replays it with true', async () => {
    const idem = fresh();
    const first = await post(members, { email: 'a@example.com', role: 'Developer' }, idem);
    expect(first.status).to.equal(201);
    expect(first.headers.get('idempotent-replayed')).to.equal(null);
    const again = await post(members, { email: 'a@example.com', role: 'Developer' }, idem);
    expect(again.status).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body).to.deep.equal(first.body);
    expect((await call(server, 'GET', members)).body.data).to.have.length(2);
  });

  it('replays an API-key creation with the same secret, stored encrypted', async () => {
    const idem = fresh();
    const first = await post(keys, { label: 'once', scopes: ['api-keys:read'] }, idem);
    const again = await post(keys, { label: 'once', scopes: ['api-keys:read'] }, idem);
    expect(again.status).to.equal(201);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(again.body.secret_key).to.equal(first.body.secret_key);
    const list = (await call(server, 'GET', keys)).body.data.filter((k: { label: string }) => k.label === 'once');
    expect(list).to.have.length(1);

    await server.daemon.stop();
    expect(await storeContains(server, first.body.secret_key)).to.equal(false);
    server = await server.restart();
  });

  it('answers 422 to the same key with another body, path or method, without the replay headers', async () => {
    const idem = fresh();
    await post(members, { email: 'b@example.com', role: 'Developer' }, idem);
    const otherBody = await post(members, { email: 'c@example.com', role: 'Developer' }, idem);
    expect(otherBody.status).to.equal(422);
    expect(otherBody.body).to.deep.equal({ message: 'idempotency key was already used with a different request payload' });
    expect(otherBody.headers.get('idempotent-replayed')).to.equal(null);
    expect(otherBody.headers.get('retry-after')).to.equal(null);
    const otherPath = await post(keys, { email: 'b@example.com', role: 'Developer' }, idem);
    expect(otherPath.status).to.equal(422);
  });

  it('hashes the raw bytes: the same JSON with other spacing is another request', async () => {
    const idem = fresh();
    const a = await call(server, 'POST', members, { rawBody: '{"email":"d@example.com","role":"Analyst"}', headers: { 'idempotency-key': idem } });
    expect(a.status).to.equal(201);
    const b = await call(server, 'POST', members, { rawBody: '{"email": "d@example.com", "role": "Analyst"}', headers: { 'idempotency-key': idem } });
    expect(b.status).to.equal(422);
  });

  it('lets one of two concurrent requests run and answers the other 409 with Retry-After', async () => {
    const { accounts } = server.daemon.core;
    const original = accounts.addMember.bind(accounts);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    accounts.addMember = async (...args) => {
      entered();
      await gate;
      return original(...args);
    };
    const idem = fresh();
    const first = post(members, { email: 'e@example.com', role: 'Developer' }, idem);
    await inside;
    const second = await call(server, 'POST', members, {
      body: { email: 'e@example.com', role: 'Developer' },
      headers: { 'idempotency-key': idem },
      operationId: 'addAccountMember',
    });
    expect(second.status).to.equal(409);
    expect(second.body).to.deep.equal({ message: 'A request with this idempotency key is already in progress' });
    expect(second.headers.get('idempotent-replayed')).to.equal('false');
    expect(Number(second.headers.get('retry-after'))).to.be.within(1, 300);
    release();
    expect((await first).status).to.equal(201);
    accounts.addMember = original;
    const third = await post(members, { email: 'e@example.com', role: 'Developer' }, idem);
    expect(third.headers.get('idempotent-replayed')).to.equal('true');
  });

  it('stores deterministic 4xx outcomes and replays them', async () => {
    const idem = fresh();
    await call(server, 'POST', members, { body: { email: 'f@example.com', role: 'Developer' } });
    const conflict = await post(members, { email: 'f@example.com', role: 'Developer' }, idem);
    expect(conflict.status).to.equal(409);
    expect(conflict.headers.get('idempotent-replayed')).to.equal(null);
    const replay = await post(members, { email: 'f@example.com', role: 'Developer' }, idem);
    expect(replay.status).to.equal(409);
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    expect(replay.body).to.deep.equal(conflict.body);

    const idem2 = fresh();
    const invalid = await post(members, { email: 'not-an-email', role: 'Developer' }, idem2);
    expect(invalid.status).to.equal(400);
    expect((await post(members, { email: 'not-an-email', role: 'Developer' }, idem2)).headers.get('idempotent-replayed')).to.equal('true');
  });

  it('keeps a secret-bearing create in progress after a 4xx until the lease runs out', async () => {
    const idem = fresh();
    const bad = await post(keys, { label: 'x', scopes: ['no-such:scope'] }, idem);
    expect(bad.status).to.equal(400);
    const blocked = await post(keys, { label: 'x', scopes: ['no-such:scope'] }, idem);
    expect(blocked.status).to.equal(409);
    expect(blocked.headers.get('idempotent-replayed')).to.equal('false');
    clock.advance(5 * MINUTE + 1);
    const rerun = await post(keys, { label: 'x', scopes: ['no-such:scope'] }, idem);
    expect(rerun.status).to.equal(400);
    expect(rerun.headers.get('idempotent-replayed')).to.equal(null);
  });

  it('releases the key after a 5xx so that a retry runs again', async () => {
    const { accounts } = server.daemon.core;
    const original = accounts.addMember.bind(accounts);
    accounts.addMember = async () => {
      throw new Error('disk on fire');
    };
    const idem = fresh();
    const failed = await post(members, { email: 'g@example.com', role: 'Developer' }, idem);
    expect(failed.status).to.equal(500);
    expect(failed.body).to.deep.equal({ message: 'internal server error' });
    accounts.addMember = original;
    const retried = await post(members, { email: 'g@example.com', role: 'Developer' }, idem);
    expect(retried.status).to.equal(201);
    expect(retried.headers.get('idempotent-replayed')).to.equal(null);
  });

  it('lets a key interrupted by a crash run again once its lease expires', async () => {
    const { accounts } = server.daemon.core;
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    accounts.addMember = async () => {
      entered();
      return new Promise(() => {}); // the process "dies" before the handler ends
    };
    const idem = fresh();
    const body = { email: 'h@example.com', role: 'Developer' };
    const hung = post(members, body, idem).catch(() => null);
    await inside;
    server = await server.restart();
    await hung;
    const during = await post(members, body, idem);
    expect(during.status).to.equal(409);
    clock.advance(5 * MINUTE + 1);
    const after = await post(members, body, idem);
    expect(after.status).to.equal(201);
    expect(after.headers.get('idempotent-replayed')).to.equal(null);
  });

  it('forgets outcomes after 24 hours, and API-key creations after 5 minutes', async () => {
    const idem = fresh();
    await post(members, { email: 'i@example.com', role: 'Developer' }, idem);
    clock.advance(24 * 60 * MINUTE - 1000);
    expect((await post(members, { email: 'i@example.com', role: 'Developer' }, idem)).headers.get('idempotent-replayed')).to.equal('true');
    clock.advance(2000);
    const rerun = await post(members, { email: 'i@example.com', role: 'Developer' }, idem);
    expect(rerun.status).to.equal(409);
    expect(rerun.headers.get('idempotent-replayed')).to.equal(null);

    const idemKey = fresh();
    const first = await post(keys, { label: 'k', scopes: ['api-keys:read'] }, idemKey);
    clock.advance(5 * MINUTE - 1000);
    expect((await post(keys, { label: 'k', scopes: ['api-keys:read'] }, idemKey)).body.secret_key).to.equal(first.body.secret_key);
    clock.advance(2000);
    const second = await post(keys, { label: 'k', scopes: ['api-keys:read'] }, idemKey);
    expect(second.status).to.equal(201);
    expect(second.body.secret_key).to.not.equal(first.body.secret_key);
  });

  it('purges expired records and keeps live ones', async () => {
    const { idempotency } = server.daemon.core;
    const old = fresh();
    await post(members, { email: 'j@example.com', role: 'Developer' }, old);
    clock.advance(25 * 60 * MINUTE);
    const live = fresh();
    await post(members, { email: 'k@example.com', role: 'Developer' }, live);
    const purged = await idempotency.purgeExpired(clock.now());
    expect(purged).to.equal(1);
    await server.daemon.stop();
    expect(await storeContains(server, old)).to.equal(false);
    expect(await storeContains(server, live)).to.equal(true);
    server = await server.restart();
  });

  it('does not store authentication failures', async () => {
    const idem = fresh();
    const denied = await call(server, 'POST', members, {
      key: `aha-sk-${'x'.repeat(64)}`,
      body: { email: 'l@example.com', role: 'Developer' },
      headers: { 'idempotency-key': idem },
    });
    expect(denied.status).to.equal(401);
    const ok = await post(members, { email: 'l@example.com', role: 'Developer' }, idem);
    expect(ok.status).to.equal(201);
    expect(ok.headers.get('idempotent-replayed')).to.equal(null);
  });

  it('scopes keys to the account', async () => {
    const { core } = server.daemon;
    const other = await core.accounts.create({ name: 'B', website: 'https://b.example', ownerEmail: 'o@b.example' });
    const otherKey = (await core.apiKeys.create(other.id, { label: 'b', scopes: ['accounts:members:add'] })).secret;
    const idem = fresh();
    expect((await post(members, { email: 'm@example.com', role: 'Developer' }, idem)).status).to.equal(201);
    const res = await post(`/v2/accounts/${other.id}/members`, { email: 'm@example.com', role: 'Developer' }, idem, otherKey);
    expect(res.status).to.equal(201);
    expect(res.headers.get('idempotent-replayed')).to.equal(null);
  });

  it('refuses an Idempotency-Key longer than 255 characters, and ignores it where not declared', async () => {
    const res = await post(members, { email: 'n@example.com', role: 'Developer' }, 'k'.repeat(256));
    expect(res.status).to.equal(400);
    const idem = fresh();
    const a = await call(server, 'PUT', `/v2/accounts/${server.accountId}`, { body: { about: 'a' }, headers: { 'idempotency-key': idem } });
    const b = await call(server, 'PUT', `/v2/accounts/${server.accountId}`, { body: { about: 'b' }, headers: { 'idempotency-key': idem } });
    expect([a.status, b.status]).to.deep.equal([200, 200]);
    expect(b.headers.get('idempotent-replayed')).to.equal(null);
  });

  it('treats the path case-insensitively and ignores a trailing slash, as routing does', async () => {
    const idem = fresh();
    const body = { email: 'o@example.com', role: 'Developer' };
    expect((await post(members, body, idem)).status).to.equal(201);
    const upper = await post(`/v2/accounts/${server.accountId.toUpperCase()}/members/`, body, idem);
    expect(upper.status).to.equal(201);
    expect(upper.headers.get('idempotent-replayed')).to.equal('true');
  });

  it('counts the key length in characters, and refuses the header given twice', async () => {
    const accented = 'é'.repeat(200);
    const res = await call(server, 'POST', members, {
      body: { email: 'p@example.com', role: 'Developer' },
      headers: { 'idempotency-key': Buffer.from(accented, 'utf8').toString('latin1') },
    });
    expect(res.status).to.equal(201);
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${server.url}${members}`,
        {
          method: 'POST',
          headers: [
            ['authorization', `Bearer ${server.adminKey}`],
            ['idempotency-key', 'a'],
            ['idempotency-key', 'b'],
            ['content-type', 'application/json'],
          ] as unknown as Record<string, string>,
        },
        (r) => {
          r.resume();
          resolve(r.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ email: 'q@example.com', role: 'Developer' }));
    });
    expect(status).to.equal(400);
  });

  describe('replayed only to the API key that made the request, holding the same scopes', () => {
    const withScopes = async (scopes: string[]) => {
      const res = await call(server, 'POST', keys, { body: { label: scopes.join(' '), scopes } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      return { id: res.body.id as string, secret: res.body.secret_key as string };
    };

    it('answers another key of the account 422 on an ordinary create (a suppression), executing nothing', async () => {
      const suppressions = `/v2/accounts/${server.accountId}/suppressions`;
      expect((await call(server, 'POST', `/v2/accounts/${server.accountId}/domains`, { body: { domain: 'example.com' } })).status).to.equal(201);
      const other = await withScopes(['suppressions:write', 'suppressions:read']);
      const body = { email: 'r@example.net', reason: 'asked', expires_at: new Date(clock.now() + 86_400_000).toISOString() };
      const idem = fresh();
      expect((await post(suppressions, body, idem)).status).to.equal(201);
      const foreign = await post(suppressions, body, idem, other.secret);
      expect(foreign.status).to.equal(422);
      expect(foreign.body).to.deep.equal({ message: 'idempotency key was already used by another API key' });
      expect(foreign.headers.get('idempotent-replayed')).to.equal(null);
      // With a payload of its own it learns no more: not even that the payloads differ.
      const otherBody = await post(suppressions, { ...body, email: 's@example.net' }, idem, other.secret);
      expect(otherBody.body).to.deep.equal({ message: 'idempotency key was already used by another API key' });
      const listed = await call(server, 'GET', `${suppressions}?email=s@example.net`);
      expect(listed.body.data).to.deep.equal([]);
      const own = await post(suppressions, body, idem);
      expect(own.status).to.equal(201);
      expect(own.headers.get('idempotent-replayed')).to.equal('true');
    });

    it('tells only the key that made it that a request is in progress (409); another key gets 422 without Retry-After', async () => {
      const { accounts } = server.daemon.core;
      const original = accounts.addMember.bind(accounts);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      accounts.addMember = async (...args) => {
        entered();
        await gate;
        return original(...args);
      };
      const other = await withScopes(['accounts:members:add']);
      const body = { email: 't@example.com', role: 'Developer' };
      const idem = fresh();
      const first = post(members, body, idem);
      await inside;
      const foreign = await post(members, body, idem, other.secret);
      expect(foreign.status).to.equal(422);
      expect(foreign.body).to.deep.equal({ message: 'idempotency key was already used by another API key' });
      expect(foreign.headers.get('idempotent-replayed')).to.equal(null);
      expect(foreign.headers.get('retry-after')).to.equal(null);
      const own = await call(server, 'POST', members, { body, headers: { 'idempotency-key': idem }, operationId: 'addAccountMember' });
      expect(own.status).to.equal(409);
      expect(own.headers.get('idempotent-replayed')).to.equal('false');
      release();
      expect((await first).status).to.equal(201);
      accounts.addMember = original;
    });

    it('answers the same key 422 once its scopes changed, and replays again once they are back', async () => {
      const self = await withScopes(['accounts:members:add', 'api-keys:write']);
      const body = { email: 'u@example.com', role: 'Analyst' };
      const idem = fresh();
      expect((await post(members, body, idem, self.secret)).status).to.equal(201);
      const widened = await call(server, 'PUT', `${keys}/${self.id}`, { body: { scopes: ['accounts:members:add', 'api-keys:write', 'accounts:read'] } });
      expect(widened.status, JSON.stringify(widened.body)).to.equal(200);
      const after = await post(members, body, idem, self.secret);
      expect(after.status).to.equal(422);
      expect(after.body).to.deep.equal({ message: 'idempotency key was already used by this API key with other scopes' });
      expect(after.headers.get('idempotent-replayed')).to.equal(null);
      expect((await call(server, 'PUT', `${keys}/${self.id}`, { body: { scopes: ['api-keys:write', 'accounts:members:add'] } })).status).to.equal(200);
      const back = await post(members, body, idem, self.secret);
      expect(back.status).to.equal(201);
      expect(back.headers.get('idempotent-replayed')).to.equal('true');
    });

    it('replays a record stored before owners were kept to no one, not even the key that sent it', async () => {
      const body = { email: 'v@example.com', role: 'Developer' };
      const idem = fresh();
      expect((await post(members, body, idem)).status).to.equal(201);
      // Rewrite the stored record as an earlier release wrote it: no owner.
      const repo = (server.daemon.core.idempotency as unknown as { repo: IdempotencyRepo }).repo;
      const stored = (await repo.get(server.accountId, idem))!;
      expect(stored.owner).to.not.equal(undefined);
      const { owner: _owner, ...legacy } = stored;
      await repo.save(legacy, stored);
      const again = await post(members, body, idem);
      expect(again.status).to.equal(422);
      expect(again.headers.get('idempotent-replayed')).to.equal(null);
    });
  });
});
