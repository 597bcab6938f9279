import { expect } from 'chai';
import { call, ManualClock, startServer, type TestServer } from '../../helpers/harness.ts';

describe('per-account rate limits', () => {
  let server: TestServer;
  const clock = new ManualClock();
  before(async () => {
    // The per-address limit of refused authentications is not what these tests are about.
    server = await startServer({ clock, config: { api: { auth_failures: { burst: 1000 } } } });
  });
  after(async () => {
    await server.stop();
  });

  it('allows a burst of 200, then answers 429 with a message and Retry-After', async () => {
    clock.advance(60_000);
    const statuses: number[] = [];
    for (let i = 0; i < 200; i++) statuses.push((await call(server, 'GET', '/v2/ping')).status);
    expect(statuses.every((s) => s === 200)).to.equal(true);
    const limited = await call(server, 'GET', '/v2/ping', { operationId: 'ping' });
    expect(limited.status).to.equal(429);
    expect(limited.body).to.deep.equal({ message: 'Too many requests, rate limited.' });
    expect(limited.headers.get('retry-after')).to.equal('1');
  });

  it('refills at 100 per second', async () => {
    clock.advance(60_000);
    for (let i = 0; i < 200; i++) await call(server, 'GET', '/v2/ping');
    expect((await call(server, 'GET', '/v2/ping')).status).to.equal(429);
    clock.advance(10);
    expect((await call(server, 'GET', '/v2/ping')).status).to.equal(200);
    expect((await call(server, 'GET', '/v2/ping')).status).to.equal(429);
    clock.advance(1000);
    for (let i = 0; i < 100; i++) expect((await call(server, 'GET', '/v2/ping')).status).to.equal(200);
    expect((await call(server, 'GET', '/v2/ping')).status).to.equal(429);
  });

  it('shares one bucket among the keys of an account and not across accounts', async () => {
    clock.advance(60_000);
    const second = await call(server, 'POST', `/v2/accounts/${server.accountId}/api-keys`, { body: { label: 'two', scopes: ['api-keys:read'] } });
    const { core } = server.daemon;
    const other = await core.accounts.create({ name: 'B', website: 'https://b.example', ownerEmail: 'o@b.example' });
    const otherKey = (await core.apiKeys.create(other.id, { label: 'b', scopes: ['api-keys:read'] })).secret;
    for (let i = 0; i < 200; i++) await call(server, 'GET', '/v2/ping', { key: i % 2 ? second.body.secret_key : server.adminKey });
    expect((await call(server, 'GET', '/v2/ping', { key: second.body.secret_key })).status).to.equal(429);
    expect((await call(server, 'GET', '/v2/ping')).status).to.equal(429);
    expect((await call(server, 'GET', '/v2/ping', { key: otherKey })).status).to.equal(200);
  });

  it("does not spend the account's budget on unauthenticated requests", async () => {
    clock.advance(60_000);
    for (let i = 0; i < 250; i++) await call(server, 'GET', '/v2/ping', { key: null });
    expect((await call(server, 'GET', '/v2/ping')).status).to.equal(200);
  });
});
