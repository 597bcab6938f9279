import { expect } from 'chai';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';

describe('cursor pagination (API keys list)', () => {
  let server: TestServer;
  let base: string;
  let all: string[];
  before(async () => {
    server = await startServer();
    base = `/v2/accounts/${server.accountId}/api-keys`;
    for (let i = 0; i < 6; i++) {
      const res = await call(server, 'POST', base, { body: { label: `k${i}`, scopes: ['accounts:read'] } });
      expect(res.status).to.equal(201);
    }
    all = (await call(server, 'GET', base)).body.data.map((k: { id: string }) => k.id);
    expect(all).to.have.length(7); // bootstrap key + 6
  });
  after(async () => {
    await server.stop();
  });

  const ids = (body: { data: Array<{ id: string }> }) => body.data.map((k) => k.id);

  it('returns everything on one page by default, with has_more false and no cursors', async () => {
    const res = await call(server, 'GET', base, { operationId: 'getAPIKeys' });
    expect(res.body.pagination).to.deep.equal({ has_more: false });
  });

  it('walks forward with after=next_cursor and back with before=previous_cursor', async () => {
    const p1 = await call(server, 'GET', `${base}?limit=3`, { operationId: 'getAPIKeys' });
    expect(ids(p1.body)).to.deep.equal(all.slice(0, 3));
    expect(p1.body.pagination.has_more).to.equal(true);
    expect(p1.body.pagination).to.not.have.property('previous_cursor');

    const p2 = await call(server, 'GET', `${base}?limit=3&after=${p1.body.pagination.next_cursor}`, { operationId: 'getAPIKeys' });
    expect(ids(p2.body)).to.deep.equal(all.slice(3, 6));
    expect(p2.body.pagination.has_more).to.equal(true);

    const p3 = await call(server, 'GET', `${base}?limit=3&after=${p2.body.pagination.next_cursor}`, { operationId: 'getAPIKeys' });
    expect(ids(p3.body)).to.deep.equal(all.slice(6));
    expect(p3.body.pagination.has_more).to.equal(false);
    expect(p3.body.pagination).to.not.have.property('next_cursor');

    // Back from the last page: the page immediately before it, not the first page.
    const back = await call(server, 'GET', `${base}?limit=3&before=${p3.body.pagination.previous_cursor}`, { operationId: 'getAPIKeys' });
    expect(ids(back.body)).to.deep.equal(all.slice(3, 6));
    const first = await call(server, 'GET', `${base}?limit=3&before=${back.body.pagination.previous_cursor}`, { operationId: 'getAPIKeys' });
    expect(ids(first.body)).to.deep.equal(all.slice(0, 3));
    expect(first.body.pagination).to.not.have.property('previous_cursor');
    expect(first.body.pagination.has_more).to.equal(true);
  });

  it('gives a short page just before a cursor near the start', async () => {
    const p = await call(server, 'GET', `${base}?limit=1&after=${(await call(server, 'GET', `${base}?limit=2`)).body.pagination.next_cursor}`);
    expect(ids(p.body)).to.deep.equal([all[2]]);
    const back = await call(server, 'GET', `${base}?limit=5&before=${p.body.pagination.previous_cursor}`);
    expect(ids(back.body)).to.deep.equal(all.slice(0, 2));
    expect(back.body.pagination).to.not.have.property('previous_cursor');
  });

  it('refuses bad limits, bad cursors and both cursors at once with 400', async () => {
    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'limit=-1', 'after=%%%', 'before=bm90LWpzb24', 'after=x&before=y', 'limit=1&limit=2']) {
      const res = await call(server, 'GET', `${base}?${query}`, { operationId: 'getAPIKeys' });
      expect(res.status, query).to.equal(400);
    }
    expect((await call(server, 'GET', `${base}?limit=0`)).body.message).to.equal('limit must be between 1 and 100');
  });
});
