import { expect } from 'chai';
import { connect } from 'node:net';
import { startServer, type TestServer } from '../../helpers/harness.ts';

/** One raw request; the whole answer the listener wrote before closing. */
function raw(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
    socket.end(request);
  });
}

/** Answers the listener writes before the app sees the request (api/server.ts) carry the dashboard's headers on /ui. */
describe('dashboard: answers written before the app sees the request', function () {
  this.timeout(30_000);
  let server: TestServer;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server.stop();
  });

  const big = `X-Big: ${'a'.repeat(20_000)}\r\n`;

  it('headers too large on a /ui path: 431 with the security headers', async () => {
    for (const path of ['/ui/', '/UI/session', '/ui/api/v2/ping']) {
      const answer = await raw(server.url, `GET ${path} HTTP/1.1\r\nHost: x\r\n${big}\r\n`);
      expect(answer, path).to.match(/^HTTP\/1\.1 431 /);
      expect(answer, path).to.match(/\r\nContent-Security-Policy: default-src 'none'; script-src 'self'/);
      expect(answer, path).to.match(/\r\nX-Frame-Options: DENY\r\n/);
      expect(answer, path).to.match(/\r\nX-Content-Type-Options: nosniff\r\n/);
      expect(answer, path).to.match(/\{"message":"request headers too large"/);
    }
  });

  it('a /ui request without Host: 400 with them; the API outside /ui gets none', async () => {
    const ui = await raw(server.url, 'GET /ui/ HTTP/1.1\r\n\r\n');
    expect(ui).to.match(/^HTTP\/1\.1 400 /);
    expect(ui).to.match(/\r\nContent-Security-Policy: /i);
    const api = await raw(server.url, `GET /v2/ping HTTP/1.1\r\nHost: x\r\n${big}\r\n`);
    expect(api).to.match(/^HTTP\/1\.1 431 /);
    expect(api).to.not.match(/Content-Security-Policy/i);
  });
});
