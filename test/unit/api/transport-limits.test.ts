import { expect } from 'chai';
import { validateConfig } from '../../../src/config/load.ts';
import { BodyBudget } from '../../../src/api/middleware/body.ts';
import { errorBody } from '../../../src/api/middleware/errors.ts';
import { clientErrorStatus, requestLine } from '../../../src/api/server.ts';

describe('HTTP layer limits and answers', () => {
  it('holds body bytes up to the cap and gives them back', () => {
    let cap = 10;
    const budget = new BodyBudget(() => cap);
    expect(budget.reserve(6)).to.equal(true);
    expect(budget.reserve(5)).to.equal(false);
    // The refused 5 were not held: 4 more fit, and then nothing.
    expect(budget.reserve(4)).to.equal(true);
    expect(budget.reserve(1)).to.equal(false);
    budget.release(6);
    expect(budget.reserve(5)).to.equal(true);
    cap = 5;
    expect(budget.reserve(1)).to.equal(false);
  });

  it('refuses a body memory cap below the per-request body limit', () => {
    expect(() => validateConfig({ api: { body_limit_bytes: 4096, body_memory_bytes: 2048 } }, 'test')).to.throw(/body_memory_bytes/);
    expect(validateConfig({ api: { body_limit_bytes: 4096, body_memory_bytes: 4096 } }, 'test').api.body_memory_bytes).to.equal(4096);
  });

  it("answers what Node's parser refuses with Node's statuses, in the contract's words", () => {
    const line = { method: 'POST', path: '/v2/ping' };
    expect(clientErrorStatus('HPE_HEADER_OVERFLOW', line).status).to.equal(431);
    expect(clientErrorStatus('ERR_HTTP_REQUEST_TIMEOUT', null).status).to.equal(408);
    expect(clientErrorStatus('HPE_CHUNK_EXTENSIONS_OVERFLOW', line).status).to.equal(413);
    expect(clientErrorStatus('HPE_INVALID_METHOD', null).status).to.equal(400);
    expect(clientErrorStatus('HPE_INVALID_HEADER_TOKEN', line).status).to.equal(400);
  });

  it('answers a method Node does not know as the router answers one it has no route for: 405 and Allow on a routed path, else 404', () => {
    expect(clientErrorStatus('HPE_INVALID_METHOD', { method: 'FOO', path: '/v2/ping' })).to.deep.equal({
      status: 405,
      message: 'method not allowed',
      headers: { Allow: 'HEAD, GET' },
    });
    expect(clientErrorStatus('HPE_INVALID_METHOD', { method: 'get', path: '/V2/Accounts/x/api-keys/' })).to.deep.equal({
      status: 405,
      message: 'method not allowed',
      headers: { Allow: 'HEAD, GET, POST' },
    });
    expect(clientErrorStatus('HPE_INVALID_METHOD', { method: 'post', path: '/v1/email/send' })).to.deep.equal({
      status: 405,
      message: 'method not allowed',
      headers: { Allow: 'POST' },
    });
    expect(clientErrorStatus('HPE_INVALID_METHOD', { method: 'FOO', path: '/nowhere' })).to.deep.equal({ status: 404, message: 'not found' });
    expect(clientErrorStatus('HPE_INVALID_METHOD', { method: 'FOO', path: null })).to.deep.equal({ status: 501, message: 'unsupported HTTP method' });
  });

  it('reads the method and path of a request line, an overlong one included, and nothing from garbage', () => {
    expect(requestLine(Buffer.from('POST /v1/email/send?x=1 HTTP/1.1\r\nHost: a\r\n'))).to.deep.equal({ method: 'POST', path: '/v1/email/send' });
    expect(requestLine(Buffer.from('GET http://h:1/v1/x HTTP/1.1\r\n'))).to.deep.equal({ method: 'GET', path: '/v1/x' });
    expect(requestLine(Buffer.from(`GET /v1/x?${'a'.repeat(20_000)} HTTP/1.1\r\n`))).to.deep.equal({ method: 'GET', path: '/v1/x' });
    expect(requestLine(Buffer.from('\x16\x03\x01\x02\x00'))).to.equal(null);
    expect(requestLine(Buffer.from('GET /v1/x'))).to.equal(null);
    expect(requestLine(undefined)).to.equal(null);
  });

  it('answers v1 paths, in any case and with doubled leading slashes, with {status} and everything else with {message}', () => {
    for (const path of ['/v1', '/v1/', '/v1/email/send', '/V1/Email/Send', '//v1/email/send', '///V1/x'])
      expect(errorBody(path, 'x'), path).to.deep.equal({ status: 'x' });
    for (const path of ['', '/', '/v2/ping', '/v10/x', '/v1x', '//v2/ping', '/x//v1/email/send'])
      expect(errorBody(path, 'x'), path).to.deep.equal({ message: 'x' });
  });
});
