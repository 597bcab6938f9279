import { expect } from 'chai';
import { request } from 'node:http';
import Koa from 'koa';
import { errorResponses } from '../../../src/api/middleware/errors.ts';
import { requestContext } from '../../../src/api/middleware/request-context.ts';
import { ApiListener } from '../../../src/api/server.ts';
import type { ApiContext, ApiState } from '../../../src/api/context.ts';
import { createLogger } from '../../../src/logging/logger.ts';
import { AppError } from '../../../src/util/errors.ts';
import { ManualClock, startServer, type TestServer } from '../../helpers/harness.ts';
import { RawConnection, rawRequest } from '../../helpers/raw-http.ts';

interface LogLine {
  level: string;
  msg: string;
  status?: number;
  err?: { message: string };
  [key: string]: unknown;
}

const parse = (lines: string[]): LogLine[] => lines.map((l) => JSON.parse(l) as LogLine);
/** Lines logged above info (warn, error, fatal). */
const loud = (lines: string[]) => parse(lines).filter((l) => !['trace', 'debug', 'info'].includes(l.level));
/** Waits until a log line satisfies `match` (the access line is written after the response). */
async function logged(lines: string[], match: (l: LogLine) => boolean, timeoutMs = 3_000): Promise<LogLine> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = parse(lines).find(match);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no such log line in:\n${lines.join('')}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('HTTP transport robustness', () => {
  describe('methods', () => {
    let server: TestServer;
    const lines: string[] = [];
    before(async () => {
      server = await startServer({ logLines: lines });
    });
    after(async () => server.stop());
    beforeEach(() => {
      lines.length = 0;
    });

    it('answers TRACE on a known path with 405, its Allow header and the error body, logged at info only', async () => {
      const res = await rawRequest(server.url, 'TRACE /v2/ping HTTP/1.1\r\nHost: x\r\n\r\n');
      expect(res?.status).to.equal(405);
      expect(res?.headers.allow).to.equal('HEAD, GET');
      expect(res?.json).to.deep.equal({ message: 'method not allowed' });
      const access = await logged(lines, (l) => l.msg === 'request');
      expect(access).to.include({ level: 'info', status: 405 });
      expect(loud(lines)).to.deep.equal([]);
    });

    it("answers TRACE under /v1/ with 405 and v1's {status} body", async () => {
      const res = await rawRequest(server.url, 'TRACE /v1/email/send HTTP/1.1\r\nHost: x\r\n\r\n');
      expect(res?.status).to.equal(405);
      expect(res?.headers.allow).to.equal('POST');
      expect(res?.json).to.deep.equal({ status: 'method not allowed' });
      await logged(lines, (l) => l.msg === 'request');
      expect(loud(lines)).to.deep.equal([]);
    });

    it('answers a method no route has (PROPFIND) with 405 and Allow on a known path, 404 elsewhere, both with the error body', async () => {
      const known = await rawRequest(server.url, `PROPFIND /v2/accounts/${server.accountId}/api-keys HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(known?.status).to.equal(405);
      expect(known?.headers.allow).to.equal('HEAD, GET, POST');
      expect(known?.json).to.deep.equal({ message: 'method not allowed' });
      const unknown = await rawRequest(server.url, 'PROPFIND /nowhere HTTP/1.1\r\nHost: x\r\n\r\n');
      expect(unknown?.status).to.equal(404);
      expect(unknown?.headers.allow).to.equal(undefined);
      expect(unknown?.json).to.deep.equal({ message: 'not found' });
      await logged(lines, (l) => l.msg === 'request' && l.status === 404);
      expect(loud(lines)).to.deep.equal([]);
    });

    it('answers a method Node does not know (FOO, lower-case get) on a routed path with 405, Allow and the error body, logged at info only', async () => {
      const cases: Array<[string, string, object]> = [
        ['FOO /v2/ping', 'HEAD, GET', { message: 'method not allowed' }],
        ['get /v2/ping', 'HEAD, GET', { message: 'method not allowed' }],
        [`get /v2/accounts/${server.accountId}/api-keys`, 'HEAD, GET, POST', { message: 'method not allowed' }],
        [`FOO /V2/Accounts/${server.accountId}/Domains/example.com/`, 'HEAD, GET, PUT, DELETE', { message: 'method not allowed' }],
        ['post /v1/email/send', 'POST', { status: 'method not allowed' }],
        ['FOO /v1/email/send?x=1', 'POST', { status: 'method not allowed' }],
      ];
      for (const [line, allow, body] of cases) {
        const res = await rawRequest(server.url, `${line} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello`);
        expect(res?.status, line).to.equal(405);
        expect(res?.headers.allow, line).to.equal(allow);
        expect(res?.json, line).to.deep.equal(body);
      }
      expect((await logged(lines, (l) => l.status === 405)).level).to.equal('info');
      expect(loud(lines)).to.deep.equal([]);
    });

    it('gives a method Node does not know the Allow that TRACE and OPTIONS get, on the path of every operation', async () => {
      const { OPERATIONS } = await import('../../../src/api/operations.ts');
      const paths = new Set([...Object.values(OPERATIONS).map((op) => `/v2${op.path.replace(/:[a-z_]+/g, 'x1')}`), '/v1/email/send']);
      for (const path of paths) {
        const trace = await rawRequest(server.url, `TRACE ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
        const foo = await rawRequest(server.url, `FOO ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
        expect(trace?.status, path).to.equal(405);
        expect(foo?.status, path).to.equal(405);
        expect(foo?.headers.allow, path).to.equal(trace?.headers.allow);
        const options = await rawRequest(server.url, `OPTIONS ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
        expect(options?.headers.allow, path).to.equal(trace?.headers.allow);
      }
    });

    it('answers a method Node does not know on a path no route has with 404 and no Allow, as PROPFIND gets', async () => {
      for (const [line, body] of [
        ['FOO /nowhere', { message: 'not found' }],
        ['get /v1/nothing', { status: 'not found' }],
        ['FOO //v1/email/send', { status: 'not found' }],
      ] as const) {
        const res = await rawRequest(server.url, `${line} HTTP/1.1\r\nHost: x\r\n\r\n`);
        expect(res?.status, line).to.equal(404);
        expect(res?.headers.allow, line).to.equal(undefined);
        expect(res?.json, line).to.deep.equal(body);
      }
    });

    it('answers CONNECT with 501 and the error body instead of dropping the connection', async () => {
      const conn = await RawConnection.open(server.url);
      await conn.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
      const res = await conn.response();
      expect(res?.status).to.equal(501);
      expect(res?.json).to.deep.equal({ message: 'unsupported HTTP method' });
      expect(await conn.closedByServer()).to.equal(true);
      expect((await logged(lines, (l) => l.status === 501)).level).to.equal('info');
      expect(loud(lines)).to.deep.equal([]);
    });

    it('answers PATCH on a route without it with 405 and Allow', async () => {
      const res = await rawRequest(server.url, 'PATCH /v2/ping HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
      expect(res?.status).to.equal(405);
      expect(res?.headers.allow).to.equal('HEAD, GET');
      expect(res?.json).to.deep.equal({ message: 'method not allowed' });
    });
  });

  describe('client disconnects', () => {
    let server: TestServer;
    const lines: string[] = [];
    before(async () => {
      server = await startServer({ logLines: lines });
    });
    after(async () => server.stop());

    it('logs a client that goes away in the middle of its body as a 499 at info, with no error line', async () => {
      lines.length = 0;
      const conn = await RawConnection.open(server.url);
      await conn.write(
        `POST /v2/accounts/${server.accountId}/api-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.adminKey}\r\n` +
          'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n0123456789',
      );
      await new Promise((r) => setTimeout(r, 50));
      conn.destroy();
      const access = await logged(lines, (l) => l.msg === 'request');
      expect(access).to.include({ level: 'info', status: 499, method: 'POST' });
      expect(loud(lines)).to.deep.equal([]);
      // The server is fine and the body's memory was given back (see the body budget tests).
      expect((await rawRequest(server.url, `GET /v2/ping HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.adminKey}\r\n\r\n`))?.status).to.equal(200);
    });
  });

  describe('refused authentications per client address', () => {
    let server: TestServer;
    const clock = new ManualClock();
    let hashed = 0;
    before(async () => {
      server = await startServer({ clock });
      // Counts how often a presented key is looked up (hashed), to see the limit comes first.
      const keys = server.daemon.core.apiKeys;
      const authenticate = keys.authenticate.bind(keys);
      keys.authenticate = (secret: string) => {
        hashed++;
        return authenticate(secret);
      };
    });
    after(async () => server.stop());

    const ping = (key: string | null, localAddress = '127.0.0.1') =>
      new Promise<{ status: number; retryAfter?: string; body: unknown }>((resolve, reject) => {
        const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
        const req = request(`${server.url}/v2/ping`, { localAddress, headers, agent: false }, (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end();
      });
    const badKey = `aha-sk-${'B'.repeat(64)}`;

    it('answers 429 with Retry-After and the error body after 30 refusals from an address, without hashing its keys', async () => {
      clock.advance(60_000);
      const statuses: number[] = [];
      for (let i = 0; i < 300; i++) statuses.push((await ping(i % 3 === 0 ? null : badKey)).status);
      expect(
        statuses.slice(0, 30).every((s) => s === 401),
        statuses.slice(0, 30).join(),
      ).to.equal(true);
      expect(
        statuses.slice(30).every((s) => s === 429),
        statuses.slice(30).join(),
      ).to.equal(true);
      hashed = 0;
      const limited = await ping(badKey);
      expect(limited.status).to.equal(429);
      expect(limited.retryAfter).to.equal('1');
      expect(limited.body).to.deep.equal({ message: 'Too many failed authentications from this address, rate limited.' });
      expect(hashed).to.equal(0);
    });

    it('holds a valid key from a limited address back too, until a refusal is regained; a success takes nothing', async () => {
      clock.advance(60_000);
      for (let i = 0; i < 30; i++) await ping(badKey);
      expect((await ping(server.adminKey)).status).to.equal(429);
      clock.advance(1_000);
      expect((await ping(server.adminKey)).status).to.equal(200);
      expect((await ping(server.adminKey)).status).to.equal(200);
      expect((await ping(badKey)).status).to.equal(401);
      expect((await ping(server.adminKey)).status).to.equal(429);
    });

    it('counts per address: another address is not held back', async () => {
      clock.advance(60_000);
      for (let i = 0; i < 31; i++) await ping(badKey, '127.0.0.1');
      expect((await ping(badKey, '127.0.0.1')).status).to.equal(429);
      expect((await ping(badKey, '127.0.0.3')).status).to.equal(401);
      expect((await ping(server.adminKey, '127.0.0.3')).status).to.equal(200);
    });

    it('counts v1 refusals (X-Api-Key) in the same bucket and answers v1 with {status}', async () => {
      clock.advance(60_000);
      const v1 = (key: string) =>
        rawRequest(server.url, `POST /v1/email/send HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`);
      for (let i = 0; i < 30; i++) expect((await v1('nope'))?.status).to.equal(403);
      const limited = await v1('nope');
      expect(limited?.status).to.equal(429);
      expect(limited?.headers['retry-after']).to.equal('1');
      expect(limited?.json).to.deep.equal({ status: 'Too many failed authentications from this address, rate limited.' });
      expect((await ping(badKey)).status).to.equal(429);
    });
  });

  describe('errors before routing', () => {
    let server: TestServer;
    before(async () => {
      server = await startServer();
    });
    after(async () => server.stop());

    it('answers a malformed request under /v1/ with 400 and {status}, elsewhere with {message}', async () => {
      const v1 = await rawRequest(server.url, 'POST /v1/email/send HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n');
      expect(v1?.status).to.equal(400);
      expect(v1?.json).to.deep.equal({ status: 'bad request' });
      const v2 = await rawRequest(server.url, '/v2/ping HTTP/1.1\r\nHost: x\r\n\r\n');
      expect(v2?.status).to.equal(400);
      expect(v2?.json).to.deep.equal({ message: 'bad request' });
    });

    it('answers headers over the size limit under /v1/ with 431 and {status}', async () => {
      const res = await rawRequest(server.url, `POST /v1/email/send HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
      expect(res?.status).to.equal(431);
      expect(res?.json).to.deep.equal({ status: 'request headers too large' });
      const url = await rawRequest(server.url, `GET /v1/email/send?q=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(url?.status).to.equal(431);
      expect(url?.json).to.deep.equal({ status: 'request headers too large' });
    });

    it('answers unknown paths under /v1 (any case, doubled slashes) with 404 and {status}, and v1 errors on /V1/ with {status}', async () => {
      for (const path of ['/v1/nothing', '/v1', '/V1/nothing', '//v1/email/send', '///v1/email/send', '/v1//email/send', '//V1/email//send?x=1']) {
        const res = await rawRequest(server.url, `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
        expect(res?.status, path).to.equal(404);
        expect(res?.json, path).to.deep.equal({ status: 'not found' });
      }
      for (const path of ['//v1/email/send', '/v1//email/send']) {
        const res = await rawRequest(
          server.url,
          `POST ${path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: nope\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
        );
        expect(res?.status, path).to.equal(404);
        expect(res?.json, path).to.deep.equal({ status: 'not found' });
      }
      // Refused by Node's parser before routing: still v1's words.
      const garbled = await rawRequest(server.url, 'POST //v1/email/send HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n');
      expect(garbled?.status).to.equal(400);
      expect(garbled?.json).to.deep.equal({ status: 'bad request' });
      const upper = await rawRequest(server.url, 'POST /V1/email/send HTTP/1.1\r\nHost: x\r\nX-Api-Key: nope\r\nContent-Length: 0\r\n\r\n');
      expect(upper?.status).to.equal(403);
      expect(upper?.json).to.deep.equal({ status: 'invalid credentials' });
    });

    it('answers an unsupported Expect with 417 and the error body', async () => {
      const v2 = await rawRequest(server.url, 'POST /v2/ping HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nContent-Length: 0\r\n\r\n');
      expect(v2?.status).to.equal(417);
      expect(v2?.json).to.deep.equal({ message: 'the only supported expectation is 100-continue' });
      const v1 = await rawRequest(server.url, 'POST /v1/email/send HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nContent-Length: 0\r\n\r\n');
      expect(v1?.status).to.equal(417);
      expect(v1?.json).to.deep.equal({ status: 'the only supported expectation is 100-continue' });
    });

    it('answers an HTTP/1.1 request without Host with 400 and the error body', async () => {
      const res = await rawRequest(server.url, `GET /v2/ping HTTP/1.1\r\nAuthorization: Bearer ${server.adminKey}\r\n\r\n`);
      expect(res?.status).to.equal(400);
      expect(res?.json).to.deep.equal({ message: 'the Host header is required' });
    });

    it('sends 100 Continue only to a request whose body is going to be read', async () => {
      const refused = await RawConnection.open(server.url);
      await refused.write(
        `POST /v2/accounts/${server.accountId}/api-keys HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n`,
      );
      const first = await refused.response();
      expect(first?.status).to.equal(401);
      expect(first?.json).to.deep.equal({ message: 'Missing or malformed bearer token' });
      // The body was never asked for, so the connection cannot be reused.
      expect(await refused.closedByServer()).to.equal(true);

      const body = JSON.stringify({ label: 'continue', scopes: ['api-keys:read'] });
      const accepted = await RawConnection.open(server.url);
      await accepted.write(
        `POST /v2/accounts/${server.accountId}/api-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.adminKey}\r\n` +
          `Expect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      expect((await accepted.response(1))?.status).to.equal(100);
      await accepted.write(body);
      expect((await accepted.response(2))?.status).to.equal(201);
      accepted.destroy();
    });
  });

  describe('error bodies of unexpected errors', () => {
    let listener: ApiListener;
    const lines: string[] = [];
    before(async () => {
      const app = new Koa<ApiState>();
      app.silent = true;
      const log = createLogger('info', { write: (line: string) => void lines.push(line) });
      app.use(requestContext(log) as Koa.Middleware<ApiState>);
      app.use(errorResponses as unknown as Koa.Middleware<ApiState>);
      app.use((async (ctx: ApiContext) => {
        switch (ctx.path) {
          case '/range':
            throw Object.assign(new RangeError('Invalid array length at secret.ts:12'), { status: 400 });
          case '/type':
            throw new TypeError("Cannot read properties of undefined (reading 'secret')");
          case '/hidden':
            ctx.throw(400, 'internal parser state 0xdeadbeef', { expose: false });
            break;
          case '/exposed':
            ctx.throw(409, 'this one is for the client');
            break;
          case '/server':
            ctx.throw(503, 'upstream db at 10.0.0.7 is down');
            break;
          case '/app':
            throw new AppError(422, 'domain words');
          case '/v1/range':
            throw Object.assign(new RangeError('secret v1'), { status: 400, expose: false });
        }
      }) as unknown as Koa.Middleware<ApiState>);
      listener = await ApiListener.start({ host: '127.0.0.1', port: 0 }, app.callback());
    });
    after(async () => listener.close(0));

    const get = (path: string) => rawRequest(listener.url, `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);

    it('answers 500 "internal server error" for anything but AppErrors and exposed 4xx http-errors, and logs the details', async () => {
      for (const path of ['/range', '/type', '/hidden', '/server']) {
        lines.length = 0;
        const res = await get(path);
        expect(res?.status, path).to.equal(500);
        expect(res?.json, path).to.deep.equal({ message: 'internal server error' });
        const error = await logged(lines, (l) => l.level === 'error');
        expect(error.err?.message, path).to.be.a('string').and.not.equal('');
      }
      const v1 = await get('/v1/range');
      expect(v1?.status).to.equal(500);
      expect(v1?.json).to.deep.equal({ status: 'internal server error' });
    });

    it('shows the words of AppErrors and of exposed 4xx http-errors', async () => {
      expect((await get('/exposed'))?.json).to.deep.equal({ message: 'this one is for the client' });
      expect((await get('/exposed'))?.status).to.equal(409);
      expect((await get('/app'))?.json).to.deep.equal({ message: 'domain words' });
      expect((await get('/app'))?.status).to.equal(422);
    });
  });
});
