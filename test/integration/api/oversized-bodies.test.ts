import { expect } from 'chai';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { RawConnection, sendWhole } from '../../helpers/raw-http.ts';

/**
 * A body past `api.body_limit_bytes` is refused with 413 before it is read. A client that sends
 * the whole body before it reads the answer must still get that 413, every time, also when the
 * connection ends with the answer (`Connection: close`, HTTP/1.0): the server reads and drops
 * the rest instead of closing on it, which would reset the connection and could take the answer
 * with it. Several MiB a request, so that the body outlasts the sockets' buffers.
 */
const LIMIT = 64 * 1024;
const BODY = 4 * 1024 * 1024;
const ROUNDS = 15;

describe('request bodies past the limit', function () {
  this.timeout(60_000);
  let server: TestServer;
  let keys: string;
  let v1Key: string;

  before(async () => {
    server = await startServer({ config: { api: { body_limit_bytes: LIMIT } } });
    keys = `/v2/accounts/${server.accountId}/api-keys`;
    v1Key = (await server.daemon.core.apiKeys.create(server.accountId, { label: 'v1', scopes: ['messages:send:all'], kind: 'v1' })).secret;
  });
  after(async () => server?.stop());

  const head = (target: string, framing: string, extra = '', version = '1.1') =>
    `POST ${target} HTTP/${version}\r\nHost: x\r\nContent-Type: application/json\r\n${extra}${framing}\r\n\r\n`;
  const declared = `Content-Length: ${BODY}`;
  const chunked = 'Transfer-Encoding: chunked';

  async function everyTime(request: string, chunkedBody: boolean, status: number, body: object): Promise<void> {
    const outcomes: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const res = await sendWhole(server.url, request, BODY, chunkedBody);
      outcomes.push('error' in res ? res.error : `${res.status} ${JSON.stringify(res.json)}`);
    }
    expect(outcomes).to.deep.equal(Array(ROUNDS).fill(`${status} ${JSON.stringify(body)}`));
  }

  const tooLarge = { message: `request body is larger than ${LIMIT} bytes` };
  const auth = 'Authorization: Bearer $KEY\r\n';
  const withKey = (text: string) => text.replace('$KEY', server.adminKey);

  it('answers 413 to each of many whole bodies declared too long, on connections that close after the answer', async () => {
    await everyTime(withKey(head(keys, declared, `${auth}Connection: close\r\n`)), false, 413, tooLarge);
  });

  it('answers 413 to each of many chunked bodies that grow too long, on connections that close after the answer', async () => {
    await everyTime(withKey(head(keys, chunked, `${auth}Connection: close\r\n`)), true, 413, tooLarge);
  });

  it('answers 413 to each of many HTTP/1.0 bodies declared too long', async () => {
    await everyTime(withKey(head(keys, declared, auth, '1.0')), false, 413, tooLarge);
  });

  it('answers 413 to each of many bodies too long on a kept-alive connection, and the connection serves the next request', async () => {
    await everyTime(withKey(head(keys, declared, auth)), false, 413, tooLarge);
    const conn = await RawConnection.open(server.url);
    try {
      await conn.write(withKey(head(keys, `Content-Length: ${LIMIT + 1}`, auth)));
      await conn.write(Buffer.alloc(LIMIT + 1, 0x61));
      expect((await conn.response(1))?.status).to.equal(413);
      await conn.write(`GET /v2/ping HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.adminKey}\r\n\r\n`);
      expect((await conn.response(2))?.status).to.equal(200);
    } finally {
      conn.destroy();
    }
  });

  it("answers 413 in v1's words to each of many v1 sends too long", async () => {
    await everyTime(head('/v1/email/send', declared, `X-Api-Key: ${v1Key}\r\nConnection: close\r\n`), false, 413, {
      status: `request body is larger than ${LIMIT} bytes`,
    });
  });

  it('answers a refused key with its 401 every time, however much body follows it', async () => {
    await everyTime(head(keys, declared, 'Authorization: Bearer aha-sk-nope\r\nConnection: close\r\n'), false, 401, {
      message: 'Missing or malformed bearer token',
    });
  });

  it('answers a method Node does not know with its 405 every time, however much body follows it', async () => {
    await everyTime(`FOO /v2/ping HTTP/1.1\r\nHost: x\r\n${declared}\r\n\r\n`, false, 405, { message: 'method not allowed' });
  });
});
