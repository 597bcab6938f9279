import { expect } from 'chai';
import { call, startServer, type TestServer } from '../../helpers/harness.ts';

describe('API input errors', () => {
  let server: TestServer;
  let keys: string;
  before(async () => {
    server = await startServer({ config: { api: { body_limit_bytes: 4096 } } });
    keys = `/v2/accounts/${server.accountId}/api-keys`;
  });
  after(async () => {
    await server.stop();
  });

  const listKeys = async () => (await call(server, 'GET', keys)).body.data.length as number;

  it('answers 400 "invalid request body" to malformed JSON and writes nothing', async () => {
    const before = await listKeys();
    const res = await call(server, 'POST', keys, {
      rawBody: '{"label": "x", "scopes": [',
      headers: { 'content-type': 'application/json' },
      operationId: 'createAPIKey',
    });
    expect(res.status).to.equal(400);
    expect(res.body).to.deep.equal({ message: 'invalid request body' });
    expect(await listKeys()).to.equal(before);
  });

  it('answers 400 to an empty body on a create', async () => {
    const res = await call(server, 'POST', keys, { rawBody: '' });
    expect(res.status).to.equal(400);
  });

  it('answers 400 naming the field for wrong types', async () => {
    const res = await call(server, 'POST', keys, { body: { label: 5, scopes: ['api-keys:read'] }, operationId: 'createAPIKey' });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.match(/^label: /);
  });

  it('answers 400 for unknown fields', async () => {
    const res = await call(server, 'POST', keys, { body: { label: 'a', scopes: ['api-keys:read'], colour: 'red' } });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.contain('colour');
  });

  it('answers 400 for unknown enum values', async () => {
    const res = await call(server, 'POST', `/v2/accounts/${server.accountId}/members`, {
      body: { email: 'a@example.com', role: 'Overlord' },
      operationId: 'addAccountMember',
    });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.match(/^role: /);
  });

  it('answers 400 for an unknown scope and writes nothing', async () => {
    const before = await listKeys();
    const res = await call(server, 'POST', keys, { body: { label: 'a', scopes: ['api-keys:read', 'mail:everything'] } });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.contain('mail:everything');
    expect(await listKeys()).to.equal(before);
  });

  it('answers 400 for a bad UUID in the path', async () => {
    const res = await call(server, 'GET', `${keys}/12345`, { operationId: 'getAPIKey' });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.equal('invalid key_id');
  });

  it('answers 404 for an unknown resource', async () => {
    const res = await call(server, 'GET', `${keys}/01890a5d-ac96-774b-bcce-b302099a8057`, { operationId: 'getAPIKey' });
    expect(res.status).to.equal(404);
    expect(res.body.message).to.equal('api key not found');
  });

  it('answers 413 for a body over the limit', async () => {
    const res = await call(server, 'POST', keys, { body: { label: 'x'.repeat(5000), scopes: ['api-keys:read'] } });
    expect(res.status).to.equal(413);
    expect(res.body.message).to.contain('4096');
  });
});
