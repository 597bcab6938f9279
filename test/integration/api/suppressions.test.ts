import { expect } from 'chai';
import { otherAccount, startDomainBed, type DomainBed } from '../../helpers/domains.ts';
import { EventsRepo } from '../../../src/store/events-repo.ts';

const DAY = 86_400_000;

describe('suppressions API', function () {
  this.timeout(30_000);
  let bed: DomainBed;
  let base: string;
  const future = (days = 30) => new Date(bed.clock.now() + days * DAY).toISOString();
  const create = (body: Record<string, unknown>, headers: Record<string, string> = {}) => bed.api('POST', base, { body, headers });
  const list = (query = '') => bed.api('GET', `${base}${query}`);
  const key = async (scopes: string[]) => {
    const res = await bed.api('POST', `/v2/accounts/${bed.server.accountId}/api-keys`, { body: { label: scopes.join(' '), scopes } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.secret_key as string;
  };

  before(async () => {
    bed = await startDomainBed();
    await bed.create('one.example');
    await bed.create('two.example');
    base = `/v2/accounts/${bed.server.accountId}/suppressions`;
  });
  after(async () => bed?.stop());
  afterEach(async () => {
    expect((await bed.api('DELETE', `${base}/all`)).status).to.equal(200);
  });

  it('creates a suppression for one domain, lists it, and refuses the same one again with 409', async () => {
    const res = await create({ email: 'Someone@Example.net', domain: 'one.example', reason: 'Asked to stop', expires_at: future() });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.object).to.equal('list');
    expect(res.body.data).to.have.length(1);
    const [row] = res.body.data;
    expect(row).to.include({ object: 'suppression', email: 'someone@example.net', domain: 'one.example', reason: 'Asked to stop' });
    expect(Date.parse(row.expires_at)).to.equal(Date.parse(future()));
    expect(row.created_at).to.equal(new Date(bed.clock.now()).toISOString());

    const listed = await list();
    expect(listed.status).to.equal(200);
    expect(listed.body.data.map((s: { id: string }) => s.id)).to.deep.equal([row.id]);
    expect(listed.body.pagination.has_more).to.equal(false);

    const again = await create({ email: 'someone@example.net', domain: 'one.example', expires_at: future() });
    expect(again.status).to.equal(409);
    expect(again.body.message).to.contain('already suppressed');
  });

  it('without a domain, suppresses the address for every domain of the account', async () => {
    const res = await create({ email: 'all@example.net', expires_at: future() });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.data.map((s: { domain: string }) => s.domain).sort()).to.deep.equal(['one.example', 'two.example']);
    expect(res.body.data[0].reason).to.equal('Added through the API');
    expect((await create({ email: 'all@example.net', expires_at: future() })).status).to.equal(409);
  });

  it('fills in only the domains not yet suppressed, and announces each row with suppression.created', async () => {
    await create({ email: 'part@example.net', domain: 'two.example', expires_at: future() });
    const res = await create({ email: 'part@example.net', expires_at: future() });
    expect(res.status).to.equal(201);
    expect(res.body.data.map((s: { domain: string }) => s.domain)).to.deep.equal(['one.example']);
    const events = await new EventsRepo(bed.server.daemon.core.store).recent(bed.server.accountId, 10, 'suppression.created');
    const mine = events.filter((e) => e.data.recipient === 'part@example.net');
    expect(mine.map((e) => e.data.sending_domain).sort()).to.deep.equal(['one.example', 'two.example']);
    expect(Object.keys(mine[0]!.data)).to.deep.equal(['account_id', 'recipient', 'created_at', 'expires_at', 'reason', 'sending_domain']);
  });

  it('filters the list by domain, email and creation time, and pages through it newest first', async () => {
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      bed.clock.advance(1000);
      const res = await create({ email: `p${i}@example.net`, domain: i % 2 ? 'two.example' : 'one.example', expires_at: future() });
      made.push(res.body.data[0].id);
    }
    const byDomain = await list('?domain=two.example');
    expect(byDomain.body.data.map((s: { email: string }) => s.email)).to.deep.equal(['p3@example.net', 'p1@example.net']);
    const byEmail = await list('?email=P2@example.net');
    expect(byEmail.body.data.map((s: { id: string }) => s.id)).to.deep.equal([made[2]]);

    const t = (i: number) => encodeURIComponent(new Date(bed.clock.now() - (4 - i) * 1000).toISOString());
    const window = await list(`?from_time=${t(1)}&to_time=${t(3)}`);
    expect(window.body.data.map((s: { email: string }) => s.email)).to.deep.equal(['p3@example.net', 'p2@example.net', 'p1@example.net']);

    const first = await list('?limit=2');
    expect(first.body.data.map((s: { id: string }) => s.id)).to.deep.equal([made[4], made[3]]);
    expect(first.body.pagination.has_more).to.equal(true);
    const second = await list(`?limit=2&after=${first.body.pagination.next_cursor}`);
    expect(second.body.data.map((s: { id: string }) => s.id)).to.deep.equal([made[2], made[1]]);
    const back = await list(`?limit=2&before=${second.body.pagination.previous_cursor}`);
    expect(back.body.data.map((s: { id: string }) => s.id)).to.deep.equal([made[4], made[3]]);
  });

  it('hides a suppression once it has expired, and lets it be created anew', async () => {
    await create({ email: 'brief@example.net', domain: 'one.example', expires_at: future(1) });
    bed.clock.advance(2 * DAY);
    expect((await list('?email=brief@example.net')).body.data).to.have.length(0);
    const res = await create({ email: 'brief@example.net', domain: 'one.example', expires_at: future(1) });
    expect(res.status).to.equal(201);
    expect((await list('?email=brief@example.net')).body.data).to.have.length(1);
  });

  it('deletes an address for one domain, then for all; 404 when there is none', async () => {
    await create({ email: 'del@example.net', expires_at: future() });
    const one = await bed.api('DELETE', `${base}?email=del@example.net&domain=one.example`);
    expect(one.status, JSON.stringify(one.body)).to.equal(200);
    expect(one.body.message).to.contain('1 suppression');
    expect((await list('?email=del@example.net')).body.data.map((s: { domain: string }) => s.domain)).to.deep.equal(['two.example']);
    expect((await bed.api('DELETE', `${base}?email=del@example.net&domain=one.example`)).status).to.equal(404);
    const rest = await bed.api('DELETE', `${base}?email=DEL@example.net`);
    expect(rest.status).to.equal(200);
    expect((await list('?email=del@example.net')).body.data).to.have.length(0);
    const none = await bed.api('DELETE', `${base}?email=del@example.net`);
    expect(none.status).to.equal(404);
    expect(none.body.message).to.contain('no suppression');
  });

  it('wipes one domain or all, and only with suppressions:wipe', async () => {
    for (const email of ['w1@example.net', 'w2@example.net']) await create({ email, expires_at: future() });
    const reader = await key(['suppressions:read', 'suppressions:delete']);
    const refused = await bed.api('DELETE', `${base}/all`, { key: reader });
    expect(refused.status).to.equal(403);
    const wiper = await key(['suppressions:wipe']);
    const one = await bed.api('DELETE', `${base}/all?domain=one.example`, { key: wiper });
    expect(one.status).to.equal(200);
    expect(one.body.message).to.equal('2 suppressions deleted');
    expect((await list()).body.data.map((s: { domain: string }) => s.domain)).to.deep.equal(['two.example', 'two.example']);
    const all = await bed.api('DELETE', `${base}/all`, { key: wiper });
    expect(all.body.message).to.equal('2 suppressions deleted');
    expect((await list()).body.data).to.have.length(0);
  });

  it('replays a create with the same Idempotency-Key instead of answering 409', async () => {
    const headers = { 'idempotency-key': 'supp-create-1' };
    const body = { email: 'idem@example.net', domain: 'one.example', expires_at: future() };
    const first = await create(body, headers);
    expect(first.status).to.equal(201);
    const replay = await create(body, headers);
    expect(replay.status).to.equal(201);
    expect(replay.headers.get('idempotent-replayed')).to.equal('true');
    expect(replay.body).to.deep.equal(first.body);
    const other = await create({ ...body, reason: 'different' }, headers);
    expect(other.status).to.equal(422);
  });

  it('refuses bad input and unknown domains with 400 (404 for list and wipe filters), writing nothing', async () => {
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ email: 'not-an-address', expires_at: future() }, 400, 'email'],
      [{ email: 'a@example.net' }, 400, 'expires_at'],
      [{ email: 'a@example.net', expires_at: 'tomorrow' }, 400, 'expires_at'],
      [{ email: 'a@example.net', expires_at: new Date(bed.clock.now() - 1000).toISOString() }, 400, 'future'],
      [{ email: 'a@example.net', expires_at: future(), reason: 'x'.repeat(256) }, 400, 'reason'],
      [{ email: 'a@example.net', expires_at: future(), colour: 'red' }, 400, 'unknown field colour'],
      [{ email: 'a@example.net', expires_at: future(), domain: 'elsewhere.example' }, 400, 'not a domain of this account'],
    ];
    for (const [body, status, text] of cases) {
      const res = await create(body);
      expect(res.status, JSON.stringify(body)).to.equal(status);
      expect(res.body.message).to.contain(text);
    }
    const raw = await bed.api('POST', base, { rawBody: '{"email":', headers: { 'content-type': 'application/json' } });
    expect(raw.status).to.equal(400);
    expect((await list()).body.data).to.have.length(0);

    expect((await list('?domain=elsewhere.example')).status).to.equal(404);
    expect((await list('?email=nope')).status).to.equal(400);
    expect((await list('?from_time=yesterday')).status).to.equal(400);
    expect((await bed.api('DELETE', base)).status).to.equal(400);
    expect((await bed.api('DELETE', `${base}?email=bad`)).status).to.equal(400);
    expect((await bed.api('DELETE', `${base}/all?domain=elsewhere.example`)).status).to.equal(404);
  });

  it('keeps accounts apart: another account sees none of these and cannot delete them', async () => {
    await create({ email: 'mine@example.net', domain: 'one.example', expires_at: future() });
    const { accountId, key: otherKey } = await otherAccount(bed);
    const theirs = `/v2/accounts/${accountId}/suppressions`;
    expect((await bed.api('GET', theirs, { key: otherKey })).body.data).to.have.length(0);
    expect((await bed.api('DELETE', `${theirs}?email=mine@example.net`, { key: otherKey })).status).to.equal(404);
    expect((await bed.api('POST', theirs, { key: otherKey, body: { email: 'x@example.net', domain: 'one.example', expires_at: future() } })).status).to.equal(
      400,
    );
    expect((await list('?email=mine@example.net')).body.data).to.have.length(1);
  });
});
