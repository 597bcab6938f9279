import { expect } from 'chai';
import { EVERY_GLOBAL_SCOPE } from '../../../src/accounts/scopes.ts';
import type { CredentialCheck } from '../../../src/smtp/submission.ts';
import { call, ManualClock, startServer, storeContains, type CallOptions, type TestServer } from '../../helpers/harness.ts';

const MINUTE = 60_000;
const UNKNOWN_ID = '01890a5d-ac96-774b-bcce-b302099a8057';

interface ApiCredential {
  id: string;
  username: string;
  scope: 'global' | 'scoped';
  domains: string[];
  sandbox: boolean;
  password?: string;
  [field: string]: unknown;
}

describe('SMTP credentials resource', () => {
  let server: TestServer;
  let clock: ManualClock;
  let account: string;
  let base: string;
  /** Another account, with a domain of its own and a key that can do anything there. */
  let other: { id: string; key: string; base: string };

  before(async () => {
    clock = new ManualClock();
    server = await startServer({ clock });
    account = `/v2/accounts/${server.accountId}`;
    base = `${account}/smtp-credentials`;
    for (const domain of ['example.com', 'example.org', 'example.net']) {
      const res = await call(server, 'POST', `${account}/domains`, { body: { domain } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
    }
    const core = server.daemon.core;
    const created = await core.accounts.create({ name: 'Other', website: 'https://other.example', ownerEmail: 'owner@other.example' });
    const key = (await core.apiKeys.create(created.id, { label: 'other admin', scopes: EVERY_GLOBAL_SCOPE })).secret;
    other = { id: created.id, key, base: `/v2/accounts/${created.id}/smtp-credentials` };
    expect((await call(server, 'POST', `/v2/accounts/${created.id}/domains`, { key, body: { domain: 'other.test' } })).status).to.equal(201);
  });
  after(async () => {
    await server.stop();
  });

  const api = (method: string, path: string, options?: CallOptions) => call(server, method, path, options);

  /** Restarts on the same data; the bootstrap account and key carry over (a restart announces none). */
  async function restart(): Promise<void> {
    const { accountId, adminKey } = server;
    server = { ...(await server.restart()), accountId, adminKey };
  }

  async function create(body: object, options: CallOptions = {}): Promise<ApiCredential> {
    const res = await api('POST', base, { body, ...options });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body as ApiCredential;
  }

  async function keyWith(scopes: string[]): Promise<string> {
    return (await server.daemon.core.apiKeys.create(server.accountId, { label: scopes.join(' '), scopes })).secret;
  }

  /** Every credential the key sees, page after page. */
  async function everyListed(key?: string, path = base): Promise<ApiCredential[]> {
    const out: ApiCredential[] = [];
    let after: string | undefined;
    for (;;) {
      const res = await api('GET', `${path}?limit=100${after ? `&after=${after}` : ''}`, key ? { key } : {});
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      out.push(...res.body.data);
      if (!res.body.pagination.has_more) return out;
      after = res.body.pagination.next_cursor;
    }
  }

  describe('create', () => {
    it('creates a global credential with a generated username and a password shown only in the 201', async () => {
      const created = await create({ name: 'Production SMTP', scope: 'global' });
      expect(created).to.include({ object: 'credential_smtp', name: 'Production SMTP', scope: 'global', sandbox: false });
      expect(created.domains).to.deep.equal([]);
      expect(created.username).to.match(/^smtp-[a-z0-9]{24}$/);
      expect(created.password).to.match(/^[A-Za-z0-9]{48}$/);
      expect(created.created_at).to.equal(created.updated_at);

      const got = await api('GET', `${base}/${created.id}`);
      expect(got.status).to.equal(200);
      const { password: _password, ...shown } = created;
      expect(got.body).to.deep.equal(shown);
      const listed = (await everyListed()).find((c) => c.id === created.id);
      expect(listed).to.deep.equal(shown);
    });

    it('gives every credential its own username and password', async () => {
      const a = await create({ name: 'a', scope: 'global' });
      const b = await create({ name: 'b', scope: 'global' });
      expect(a.username).to.not.equal(b.username);
      expect(a.password).to.not.equal(b.password);
    });

    it('accepts domains on a global credential and ignores them', async () => {
      for (const domains of [['example.com'], ['not-ours.test'], [], null]) {
        const created = await create({ name: 'global with domains', scope: 'global', domains });
        expect(created.domains, JSON.stringify(domains)).to.deep.equal([]);
      }
    });

    it('associates a scoped credential with its domains, normalised and without duplicates', async () => {
      const created = await create({ name: 'scoped', scope: 'scoped', sandbox: true, domains: ['Example.COM.', 'example.com', ' example.org '] });
      expect(created).to.include({ scope: 'scoped', sandbox: true });
      expect(created.domains).to.deep.equal(['example.com', 'example.org']);
      expect((await api('GET', `${base}/${created.id}`)).body.domains).to.deep.equal(['example.com', 'example.org']);
    });

    it('stores only an scrypt hash of the password', async () => {
      const created = await create({ name: 'hashed', scope: 'global' });
      await server.daemon.stop();
      expect(await storeContains(server, created.password!)).to.equal(false);
      expect(await storeContains(server, created.username), 'the scan sees stored credentials').to.equal(true);
      await restart();
      expect(await server.daemon.core.smtpCredentials.authenticate(created.username, created.password!)).to.not.equal(null);
    });

    it('answers 400 to invalid requests and writes nothing', async () => {
      const before = (await everyListed()).length;
      const cases: Array<[object | string, RegExp]> = [
        [{ scope: 'global' }, /name/],
        [{ name: '', scope: 'global' }, /name/],
        [{ name: '   ', scope: 'global' }, /name/],
        [{ name: 'x'.repeat(256), scope: 'global' }, /name/],
        [{ name: 'nul\u0000byte', scope: 'global' }, /name/],
        [{ name: 42, scope: 'global' }, /name/],
        [{ name: 'x' }, /scope/],
        [{ name: 'x', scope: 'everything' }, /scope/],
        [{ name: 'x', scope: 'scoped' }, /domains/],
        [{ name: 'x', scope: 'scoped', domains: null }, /domains/],
        [{ name: 'x', scope: 'scoped', domains: [] }, /domains/],
        [{ name: 'x', scope: 'scoped', domains: ['not a domain'] }, /invalid domain/],
        [{ name: 'x', scope: 'scoped', domains: 'example.com' }, /domains/],
        [{ name: 'x', scope: 'scoped', domains: ['unknown.test'] }, /unknown\.test is not a domain of this account/],
        [{ name: 'x', scope: 'scoped', domains: ['example.com', 'other.test'] }, /other\.test is not a domain of this account/],
        [{ name: 'x', scope: 'global', sandbox: 'yes' }, /sandbox/],
        [{ name: 'x', scope: 'global', username: 'mine' }, /unknown field username/],
        [{ name: 'x', scope: 'global', password: 'secret' }, /unknown field password/],
        ['{"name":', /invalid request body/],
      ];
      for (const [body, message] of cases) {
        const res = await api('POST', base, typeof body === 'string' ? { rawBody: body, headers: { 'content-type': 'application/json' } } : { body });
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.message, JSON.stringify(body)).to.match(message);
      }
      expect((await everyListed()).length).to.equal(before);
    });
  });

  describe('list', () => {
    let fresh: { id: string; key: string; base: string };
    let ids: string[];
    before(async () => {
      const core = server.daemon.core;
      const created = await core.accounts.create({ name: 'Pages', website: 'https://pages.example', ownerEmail: 'owner@pages.example' });
      const key = (await core.apiKeys.create(created.id, { label: 'pages', scopes: EVERY_GLOBAL_SCOPE })).secret;
      fresh = { id: created.id, key, base: `/v2/accounts/${created.id}/smtp-credentials` };
      ids = [];
      for (let i = 0; i < 5; i++) {
        const res = await api('POST', fresh.base, { key, body: { name: `c${i}`, scope: 'global' } });
        ids.push(res.body.id);
      }
    });

    it('pages forwards with after and backwards with before, in creation order', async () => {
      const page = (query: string) => api('GET', `${fresh.base}?${query}`, { key: fresh.key });
      const first = await page('limit=2');
      expect(first.body.data.map((c: ApiCredential) => c.id)).to.deep.equal(ids.slice(0, 2));
      expect(first.body.pagination.has_more).to.equal(true);
      expect(first.body.pagination).to.not.have.property('previous_cursor');
      const second = await page(`limit=2&after=${first.body.pagination.next_cursor}`);
      expect(second.body.data.map((c: ApiCredential) => c.id)).to.deep.equal(ids.slice(2, 4));
      const third = await page(`limit=2&after=${second.body.pagination.next_cursor}`);
      expect(third.body.data.map((c: ApiCredential) => c.id)).to.deep.equal(ids.slice(4));
      expect(third.body.pagination).to.deep.equal({ has_more: false, previous_cursor: third.body.pagination.previous_cursor });
      const back = await page(`limit=2&before=${third.body.pagination.previous_cursor}`);
      expect(back.body.data.map((c: ApiCredential) => c.id)).to.deep.equal(ids.slice(2, 4));
      expect(back.body.pagination.has_more).to.equal(true);
      const start = await page(`limit=2&before=${back.body.pagination.previous_cursor}`);
      expect(start.body.data.map((c: ApiCredential) => c.id)).to.deep.equal(ids.slice(0, 2));
      expect(start.body.pagination).to.not.have.property('previous_cursor');
    });

    it('answers 400 to a bad limit or cursor', async () => {
      for (const query of ['limit=0', 'limit=101', 'limit=x', 'after=nope', 'after=a&before=b']) {
        const res = await api('GET', `${fresh.base}?${query}`, { key: fresh.key });
        expect(res.status, query).to.equal(400);
      }
    });

    it("never lists another account's credentials", async () => {
      const mine = (await everyListed()).map((c) => c.id);
      const theirs = (await everyListed(fresh.key, fresh.base)).map((c) => c.id);
      expect(theirs).to.deep.equal(ids);
      expect(mine.some((id) => ids.includes(id))).to.equal(false);
    });
  });

  describe('get and delete', () => {
    it('deletes a credential: 200, then it is gone from get, list and delete', async () => {
      const created = await create({ name: 'short-lived', scope: 'global' });
      const res = await api('DELETE', `${base}/${created.id}`);
      expect(res.status).to.equal(200);
      expect(res.body.message).to.equal(`smtp credential ${created.id} (short-lived) deleted successfully`);
      expect((await api('GET', `${base}/${created.id}`)).status).to.equal(404);
      expect((await api('DELETE', `${base}/${created.id}`)).status).to.equal(404);
      expect((await everyListed()).some((c) => c.id === created.id)).to.equal(false);
    });

    it('answers 404 to an unknown id and 400 to a malformed one', async () => {
      for (const method of ['GET', 'DELETE']) {
        const unknown = await api(method, `${base}/${UNKNOWN_ID}`);
        expect(unknown.status, method).to.equal(404);
        expect(unknown.body.message).to.equal('smtp credential not found');
        const malformed = await api(method, `${base}/not-a-uuid`);
        expect(malformed.status, method).to.equal(400);
        expect(malformed.body.message).to.equal('invalid smtp_credential_id');
      }
    });

    it("answers 404 to another account's credential, under either account's path", async () => {
      const theirs = (await api('POST', other.base, { key: other.key, body: { name: 'theirs', scope: 'scoped', domains: ['other.test'] } })).body;
      expect((await api('GET', `${base}/${theirs.id}`)).status).to.equal(404);
      expect((await api('DELETE', `${base}/${theirs.id}`)).status).to.equal(404);
      expect((await api('GET', `${other.base}/${theirs.id}`)).status).to.equal(401);
      expect((await api('GET', `${other.base}/${theirs.id}`, { key: other.key })).status).to.equal(200);
    });
  });

  describe('domain-scoped keys', () => {
    let globalOne: ApiCredential;
    let comOnly: ApiCredential;
    let orgOnly: ApiCredential;
    let both: ApiCredential;
    before(async () => {
      globalOne = await create({ name: 'global', scope: 'global' });
      comOnly = await create({ name: 'com', scope: 'scoped', domains: ['example.com'] });
      orgOnly = await create({ name: 'org', scope: 'scoped', domains: ['example.org'] });
      both = await create({ name: 'both', scope: 'scoped', domains: ['example.com', 'example.org'] });
    });

    it('lists only credentials associated with an authorised domain, each once', async () => {
      const com = (await everyListed(await keyWith(['smtp-credentials:read:{example.com}']))).map((c) => c.id);
      expect(com).to.include.members([comOnly.id, both.id]);
      expect(com).to.not.include.members([globalOne.id]);
      expect(com).to.not.include(orgOnly.id);
      const comAndOrg = (await everyListed(await keyWith(['smtp-credentials:read:{example.com}', 'smtp-credentials:read:{example.org}']))).map((c) => c.id);
      expect(comAndOrg).to.include.members([comOnly.id, orgOnly.id, both.id]);
      expect(comAndOrg).to.not.include(globalOne.id);
      expect(new Set(comAndOrg).size).to.equal(comAndOrg.length);
      expect(comAndOrg).to.deep.equal([...comAndOrg].sort(), 'creation order');
      const net = await everyListed(await keyWith(['smtp-credentials:read:{example.net}']));
      expect(net).to.deep.equal([]);
    });

    it('pages a domain-scoped listing over several domains without repeats', async () => {
      const key = await keyWith(['smtp-credentials:read:{example.com}', 'smtp-credentials:read:{example.org}']);
      const all = (await everyListed(key)).map((c) => c.id);
      const seen: string[] = [];
      let after: string | undefined;
      let pages = 0;
      for (;;) {
        const res = await api('GET', `${base}?limit=1${after ? `&after=${after}` : ''}`, { key });
        seen.push(...res.body.data.map((c: ApiCredential) => c.id));
        pages++;
        if (!res.body.pagination.has_more) {
          expect(res.body.pagination.previous_cursor === undefined).to.equal(pages === 1);
          break;
        }
        after = res.body.pagination.next_cursor;
      }
      expect(seen).to.deep.equal(all);
      const last = await api('GET', `${base}?limit=1&after=${after ?? ''}`, { key });
      const back = await api('GET', `${base}?limit=2&before=${last.body.pagination.previous_cursor}`, { key });
      expect(back.body.data.map((c: ApiCredential) => c.id)).to.deep.equal(all.slice(-3, -1));
      expect(back.body.pagination.has_more).to.equal(true);
    });

    it('gets a credential only through one of its domains', async () => {
      const key = await keyWith(['smtp-credentials:read:{example.com}']);
      expect((await api('GET', `${base}/${comOnly.id}`, { key })).status).to.equal(200);
      expect((await api('GET', `${base}/${both.id}`, { key })).status).to.equal(200);
      expect((await api('GET', `${base}/${orgOnly.id}`, { key })).status).to.equal(403);
      expect((await api('GET', `${base}/${globalOne.id}`, { key })).status).to.equal(403);
      expect((await api('GET', `${base}/${UNKNOWN_ID}`, { key })).status).to.equal(404);
    });

    it('creates only scoped credentials whose domains are all authorised', async () => {
      const key = await keyWith(['smtp-credentials:write:{example.com}']);
      const ok = await api('POST', base, { key, body: { name: 'mine', scope: 'scoped', domains: ['EXAMPLE.com'] } });
      expect(ok.status, JSON.stringify(ok.body)).to.equal(201);
      expect(ok.body.domains).to.deep.equal(['example.com']);
      for (const body of [
        { name: 'more', scope: 'scoped', domains: ['example.com', 'example.org'] },
        { name: 'global', scope: 'global' },
        { name: 'global', scope: 'global', domains: ['example.com'] },
        { name: 'unknown', scope: 'scoped', domains: ['unknown.test'] },
      ]) {
        const res = await api('POST', base, { key, body });
        expect(res.status, JSON.stringify(body)).to.equal(403);
      }
    });

    it('creates a global credential with write:all only', async () => {
      const key = await keyWith(['smtp-credentials:write:all']);
      expect((await api('POST', base, { key, body: { name: 'g', scope: 'global' } })).status).to.equal(201);
      expect((await api('POST', base, { key, body: { name: 's', scope: 'scoped', domains: ['example.net'] } })).status).to.equal(201);
    });

    it('deletes with delete:all or a delete role for at least one associated domain', async () => {
      const orgDeleter = await keyWith(['smtp-credentials:delete:{example.org}']);
      const victim = await create({ name: 'victim', scope: 'scoped', domains: ['example.com', 'example.org'] });
      expect((await api('DELETE', `${base}/${comOnly.id}`, { key: orgDeleter })).status).to.equal(403);
      expect((await api('DELETE', `${base}/${globalOne.id}`, { key: orgDeleter })).status).to.equal(403);
      expect((await api('DELETE', `${base}/${victim.id}`, { key: orgDeleter })).status).to.equal(200);
      const global = await create({ name: 'global victim', scope: 'global' });
      expect((await api('DELETE', `${base}/${global.id}`, { key: await keyWith(['smtp-credentials:delete:all']) })).status).to.equal(200);
    });

    it('answers 403 to keys without any role of the operation', async () => {
      const reader = await keyWith(['smtp-credentials:read:all']);
      expect((await api('POST', base, { key: reader, body: { name: 'x', scope: 'global' } })).status).to.equal(403);
      expect((await api('DELETE', `${base}/${comOnly.id}`, { key: reader })).status).to.equal(403);
      const writer = await keyWith(['smtp-credentials:write:all']);
      expect((await api('GET', base, { key: writer })).status).to.equal(403);
      expect((await api('GET', `${base}/${comOnly.id}`, { key: writer })).status).to.equal(403);
    });
  });

  describe('deleted domains', () => {
    it('no longer associates a credential with a deleted domain, nor with a new domain of that name', async () => {
      const smtp = server.daemon.core.smtpCredentials;
      expect((await api('POST', `${account}/domains`, { body: { domain: 'brief.test' } })).status).to.equal(201);
      const created = await create({ name: 'brief', scope: 'scoped', domains: ['brief.test', 'example.com'] });
      // The sender domains an SMTP session of this credential may use.
      const sessionDomains = async () => (await smtp.authenticate(created.username, created.password!))?.domains;
      expect(await sessionDomains()).to.deep.equal(['brief.test', 'example.com']);

      expect((await api('DELETE', `${account}/domains/brief.test`)).status).to.equal(200);
      expect((await api('GET', `${base}/${created.id}`)).body.domains).to.deep.equal(['example.com']);
      expect(await sessionDomains()).to.deep.equal(['example.com']);

      expect((await api('POST', `${account}/domains`, { body: { domain: 'brief.test' } })).status).to.equal(201);
      expect(await sessionDomains()).to.deep.equal(['example.com']);
      const reader = await keyWith(['smtp-credentials:read:{brief.test}']);
      expect((await everyListed(reader)).map((c) => c.id)).to.not.include(created.id);
      expect((await api('GET', `${base}/${created.id}`, { key: reader })).status).to.equal(403);
    });
  });

  describe('Idempotency-Key', () => {
    let n = 0;
    const idem = () => `smtp-${++n}-${Date.now()}`;
    const post = (body: object, key: string) => api('POST', base, { body, headers: { 'Idempotency-Key': key } });

    it('replays the creation with the same password for the ordinary 24 hours, kept encrypted', async () => {
      const key = idem();
      const body = { name: 'idempotent', scope: 'scoped', domains: ['example.com'] };
      const first = await post(body, key);
      expect(first.status).to.equal(201);
      expect(first.headers.get('idempotent-replayed')).to.equal(null);
      clock.advance(23 * 60 * MINUTE);
      const again = await post(body, key);
      expect(again.status).to.equal(201);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      expect((await everyListed()).filter((c) => c.name === 'idempotent')).to.have.length(1);

      await server.daemon.stop();
      expect(await storeContains(server, first.body.password)).to.equal(false);
      await restart();

      // Past the retention the key is forgotten with the password: the request runs again.
      clock.advance(61 * MINUTE);
      const later = await post(body, key);
      expect(later.status).to.equal(201);
      expect(later.headers.get('idempotent-replayed')).to.equal(null);
      expect(later.body.id).to.not.equal(first.body.id);
      expect(later.body.password).to.not.equal(first.body.password);
    });

    it('answers 422 to the same key with another body', async () => {
      const key = idem();
      expect((await post({ name: 'one', scope: 'global' }, key)).status).to.equal(201);
      const res = await post({ name: 'two', scope: 'global' }, key);
      expect(res.status).to.equal(422);
      expect(res.headers.get('idempotent-replayed')).to.equal(null);
    });

    it('stores a 4xx like any create and replays it', async () => {
      const key = idem();
      const body = { name: 'bad', scope: 'scoped', domains: ['unknown.test'] };
      const first = await post(body, key);
      expect(first.status).to.equal(400);
      const replay = await post(body, key);
      expect(replay.status).to.equal(400);
      expect(replay.headers.get('idempotent-replayed')).to.equal('true');
      expect(replay.body).to.deep.equal(first.body);
    });
  });

  describe('authenticate (for the SMTP listener)', () => {
    it('accepts the right password and refuses a wrong one or an unknown username', async () => {
      const smtp = server.daemon.core.smtpCredentials;
      const created = await create({ name: 'login', scope: 'scoped', domains: ['example.com'] });
      const ok = await smtp.authenticate(created.username, created.password!);
      expect(ok).to.include({ id: created.id, accountId: server.accountId, username: created.username, scope: 'scoped', sandbox: false });
      expect(ok?.domains).to.deep.equal(['example.com']);
      expect(ok).to.not.have.property('password');
      expect((await smtp.authenticate(created.username.toUpperCase(), created.password!))?.id, 'usernames ignore case').to.equal(created.id);
      expect(await smtp.authenticate(created.username, created.password!.toLowerCase())).to.equal(null);
      expect(await smtp.authenticate(created.username, `${created.password}x`)).to.equal(null);
      expect(await smtp.authenticate(created.username, '')).to.equal(null);
      expect(await smtp.authenticate('smtp-nobody000000000000000000', created.password!)).to.equal(null);
      expect(await smtp.authenticate(created.username, 'x'.repeat(5000))).to.equal(null);
      // A remembered login does not vouch for another password.
      expect(await smtp.authenticate(created.username, created.password!.slice(1))).to.equal(null);
    });

    it('stops authenticating a deleted credential at once', async () => {
      const smtp = server.daemon.core.smtpCredentials;
      const created = await create({ name: 'revoked', scope: 'global' });
      expect(await smtp.authenticate(created.username, created.password!)).to.not.equal(null);
      expect(await smtp.authenticate(created.username, created.password!), 'remembered').to.not.equal(null);
      expect(await smtp.exists(created.id)).to.equal(true);
      expect((await api('DELETE', `${base}/${created.id}`)).status).to.equal(200);
      expect(await smtp.authenticate(created.username, created.password!)).to.equal(null);
      expect(await smtp.byUsername(created.username)).to.equal(undefined);
      expect(await smtp.exists(created.id)).to.equal(false);
    });

    it('hands the SMTP listener the associated domains that still exist, by name', async () => {
      const smtp: CredentialCheck = server.daemon.core.smtpCredentials;
      expect((await api('POST', `${account}/domains`, { body: { domain: 'fleeting.test' } })).status).to.equal(201);
      const created = await create({ name: 'fleeting', scope: 'scoped', domains: ['fleeting.test', 'example.org'] });
      expect((await smtp.authenticate(created.username, created.password!))?.domains).to.deep.equal(['fleeting.test', 'example.org']);
      expect((await api('DELETE', `${account}/domains/fleeting.test`)).status).to.equal(200);
      expect((await smtp.authenticate(created.username, created.password!))?.domains).to.deep.equal(['example.org']);
      const global = await create({ name: 'everywhere', scope: 'global' });
      expect((await smtp.authenticate(global.username, global.password!))?.domains).to.deep.equal([]);
    });

    it('names the sender domains a scoped credential is tied to, and none for a global one', async () => {
      const smtp = server.daemon.core.smtpCredentials;
      const scoped = await smtp.get(server.accountId, (await create({ name: 'policy', scope: 'scoped', domains: ['Example.ORG'] })).id);
      expect(await smtp.domainsOf(scoped)).to.deep.equal(['example.org']);
      const global = await smtp.get(server.accountId, (await create({ name: 'policy', scope: 'global' })).id);
      expect(await smtp.domainsOf(global)).to.deep.equal([]);
    });
  });
});
