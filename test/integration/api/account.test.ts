import { expect } from 'chai';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';

describe('account and members resources', () => {
  let server: TestServer;
  let base: string;
  before(async () => {
    server = await startServer();
    base = `/v2/accounts/${server.accountId}`;
  });
  after(async () => {
    await server.stop();
  });

  it('reads the account', async () => {
    const res = await call(server, 'GET', base, { operationId: 'getAccount' });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ object: 'account', id: server.accountId, parent_account_id: null });
  });

  it('updates the fields given and keeps the rest', async () => {
    const res = await call(server, 'PUT', base, {
      body: { name: 'Acme', website: 'https://acme.example', track_opens: true, message_data_retention: 0 },
      operationId: 'updateAccount',
    });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ name: 'Acme', website: 'https://acme.example', track_opens: true, track_clicks: false, message_data_retention: 0 });
    expect(Date.parse(res.body.updated_at)).to.be.at.least(Date.parse(res.body.created_at));
    const again = await call(server, 'GET', base);
    expect(again.body.name).to.equal('Acme');
  });

  it('refuses out-of-range and malformed account fields', async () => {
    for (const body of [
      { message_metadata_retention: 0 },
      { message_metadata_retention: 31 },
      { message_data_retention: -1 },
      { message_data_retention: 1.5 },
      { website: 'not a url' },
      { website: 'ftp://files.example' },
      { name: '' },
      { track_opens: 'yes' },
    ]) {
      const res = await call(server, 'PUT', base, { body, operationId: 'updateAccount' });
      expect(res.status, JSON.stringify(body)).to.equal(400);
    }
  });

  it('answers an empty update with the unchanged account', async () => {
    const before = await call(server, 'GET', base);
    const res = await call(server, 'PUT', base, { body: {}, operationId: 'updateAccount' });
    expect(res.status).to.equal(200);
    expect(res.body.name).to.equal(before.body.name);
  });

  it('lists the owner as an Administrator member', async () => {
    const account = (await call(server, 'GET', base)).body;
    const res = await call(server, 'GET', `${base}/members`, { operationId: 'getAccountMembers' });
    expect(res.status).to.equal(200);
    expect(res.body.object).to.equal('list');
    expect(res.body).to.not.have.property('pagination');
    const owner = res.body.data.find((m: { user_id: string }) => m.user_id === account.owner_id);
    expect(owner).to.include({ account_id: server.accountId, role: 'Administrator' });
  });

  it('adds a member, refuses the same user twice with 409, removes it', async () => {
    const added = await call(server, 'POST', `${base}/members`, {
      body: { email: 'Dev@Example.com', name: 'Dev', role: 'Developer' },
      operationId: 'addAccountMember',
    });
    expect(added.status).to.equal(201);
    expect(added.body).to.include({ account_id: server.accountId, role: 'Developer' });
    const again = await call(server, 'POST', `${base}/members`, { body: { email: 'dev@example.com', role: 'Analyst' }, operationId: 'addAccountMember' });
    expect(again.status).to.equal(409);
    const removed = await call(server, 'DELETE', `${base}/members/${added.body.user_id}`, { operationId: 'removeAccountMember' });
    expect(removed.status).to.equal(200);
    const list = await call(server, 'GET', `${base}/members`);
    expect(list.body.data.map((m: { user_id: string }) => m.user_id)).to.not.include(added.body.user_id);
    expect((await call(server, 'DELETE', `${base}/members/${added.body.user_id}`, { operationId: 'removeAccountMember' })).status).to.equal(404);
  });

  it('refuses to remove the owner', async () => {
    const account = (await call(server, 'GET', base)).body;
    const res = await call(server, 'DELETE', `${base}/members/${account.owner_id}`, { operationId: 'removeAccountMember' });
    expect(res.status).to.equal(403);
    expect(res.body.message).to.equal('the account owner cannot be removed');
  });

  it('refuses a member name with control characters (CR/LF, NUL) with 400, and adds no one', async () => {
    const before = (await call(server, 'GET', `${base}/members`)).body.data.length;
    for (const name of ['Dev\r\nBcc: x@example.org', 'Dev\u0000', 'Dev\u001b[31m', 'Dev\u202e']) {
      const res = await call(server, 'POST', `${base}/members`, {
        body: { email: 'ctl@example.com', name, role: 'Developer' },
        operationId: 'addAccountMember',
      });
      expect(res.status, name).to.equal(400);
      expect(res.body).to.deep.equal({ message: 'name must not contain control characters' });
    }
    expect((await call(server, 'GET', `${base}/members`)).body.data).to.have.length(before);
  });

  it('refuses a bad member email or user id', async () => {
    expect((await call(server, 'POST', `${base}/members`, { body: { email: 'nope', role: 'Developer' } })).status).to.equal(400);
    expect((await call(server, 'POST', `${base}/members`, { body: { email: 'a@b.example' } })).status).to.equal(400);
    expect((await call(server, 'DELETE', `${base}/members/123`)).status).to.equal(400);
  });
});
