import { expect } from 'chai';
import { LeanHttpServer, type LeanAnswer, type LeanHandler, type LeanRequest } from '../../../src/tracking/lean-http.ts';
import { RawConnection, rawRequest } from '../../helpers/raw-http.ts';

const ok = (text: string): LeanAnswer => ({
  status: 200,
  headers: `Content-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(text)}\r\n`,
  body: Buffer.from(text),
});

describe("the tracking listener's HTTP server (lean-http)", function () {
  this.timeout(20_000);
  let server: LeanHttpServer;
  let seen: LeanRequest[];
  let handler: LeanHandler;
  const errors: unknown[] = [];

  beforeEach(async () => {
    seen = [];
    errors.length = 0;
    handler = (req) => ok(`${req.method} ${req.target}`);
    server = await LeanHttpServer.start(
      { host: '127.0.0.1', port: 0, headMs: 300, idleMs: 1000 },
      (req) => {
        seen.push(req);
        return handler(req);
      },
      (err) => errors.push(err),
    );
  });
  afterEach(async () => {
    await server.close(500);
  });

  it('answers keep-alive requests on one connection, and hands over the headers the endpoint reads', async () => {
    const conn = await RawConnection.open(server.url);
    try {
      await conn.write(
        'GET /c/a?x=1 HTTP/1.1\r\nHost: Track.Example.com\r\nUser-Agent: UA/1\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2\r\nAccept: */*\r\n\r\n',
      );
      const first = await conn.response(1);
      expect(first).to.include({ status: 200, text: 'GET /c/a?x=1' });
      expect(first!.headers).to.include({ connection: 'keep-alive', 'content-length': '12' });
      expect(first!.headers.date).to.match(/GMT$/);
      expect(seen[0]).to.include({ method: 'GET', target: '/c/a?x=1', host: 'Track.Example.com', userAgent: 'UA/1', forwardedFor: '10.0.0.1, 10.0.0.2' });
      await conn.write('GET /o/b HTTP/1.1\r\nHost: h.example\r\n\r\n');
      expect(await conn.response(2)).to.include({ status: 200, text: 'GET /o/b' });
      expect(conn.closed).to.equal(false);
    } finally {
      conn.destroy();
    }
  });

  it('answers pipelined requests in order, one waiting for an answer still on its way', async () => {
    let release!: () => void;
    const later = new Promise<void>((resolve) => (release = resolve));
    handler = (req) => (req.target === '/slow' ? later.then(() => ok('slow')) : ok('fast'));
    const conn = await RawConnection.open(server.url);
    try {
      await conn.write('GET /slow HTTP/1.1\r\nHost: h\r\n\r\nGET /fast HTTP/1.1\r\nHost: h\r\n\r\nGET /fast HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
      await new Promise((r) => setTimeout(r, 50));
      expect(conn.responses).to.have.length(0);
      release();
      expect((await conn.response(3))!.text).to.equal('fast');
      expect(conn.responses.map((r) => r.text)).to.deep.equal(['slow', 'fast', 'fast']);
      expect(conn.responses[2]!.headers.connection).to.equal('close');
      expect(await conn.closedByServer()).to.equal(true);
    } finally {
      conn.destroy();
    }
  });

  it('closes after an HTTP/1.0 request unless it asks for keep-alive', async () => {
    const conn = await RawConnection.open(server.url);
    try {
      await conn.write('GET /a HTTP/1.0\r\n\r\n');
      expect((await conn.response(1))!.headers.connection).to.equal('close');
      expect(await conn.closedByServer()).to.equal(true);
    } finally {
      conn.destroy();
    }
    const kept = await RawConnection.open(server.url);
    try {
      await kept.write('GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n');
      expect((await kept.response(1))!.headers.connection).to.equal('keep-alive');
    } finally {
      kept.destroy();
    }
  });

  it('stops reading pipelined requests while the client does not read its answers, and goes on when it does', async () => {
    const big = 'x'.repeat(16 * 1024);
    handler = () => ok(big);
    const total = 5_000;
    const conn = await RawConnection.open(server.url);
    try {
      conn.socket.pause();
      await conn.write('GET / HTTP/1.1\r\nHost: h\r\n\r\n'.repeat(total));
      await new Promise((r) => setTimeout(r, 500));
      // The kernel's buffers hold a few MB of answers; past them the server reads on no further.
      expect(seen.length).to.be.below(total);
      const stalledAt = seen.length;
      await new Promise((r) => setTimeout(r, 200));
      expect(seen.length).to.equal(stalledAt);
      conn.socket.resume();
      expect((await conn.response(total, 15_000))!.status).to.equal(200);
      expect(seen).to.have.length(total);
    } finally {
      conn.destroy();
    }
  });

  it('sends no body to HEAD, with the length the GET would have', async () => {
    const conn = await RawConnection.open(server.url);
    try {
      const bytes: Buffer[] = [];
      conn.socket.on('data', (d: Buffer) => bytes.push(d));
      await conn.write('HEAD /pixel HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n');
      await conn.closedByServer();
      const text = Buffer.concat(bytes).toString('latin1');
      expect(text).to.match(/^HTTP\/1\.1 200 OK\r\n/);
      expect(text).to.include('Content-Length: 11\r\n');
      expect(text.endsWith('\r\n\r\n')).to.equal(true);
    } finally {
      conn.destroy();
    }
  });

  const refusals: Array<[string, string, number]> = [
    ['no Host in HTTP/1.1', 'GET /a HTTP/1.1\r\n\r\n', 400],
    ['two Host headers', 'GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 400],
    ['a request body by length', 'GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello', 400],
    ['a chunked body', 'GET /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
    ['a folded header', 'GET /a HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n  2\r\n\r\n', 400],
    ['a header line without a colon', 'GET /a HTTP/1.1\r\nHost: a\r\nnonsense\r\n\r\n', 400],
    ['a space before the colon', 'GET /a HTTP/1.1\r\nHost : a\r\n\r\n', 400],
    ['a malformed request line', 'GET  /a HTTP/1.1\r\nHost: a\r\n\r\n', 400],
    ['a method that is no token', 'G(T /a HTTP/1.1\r\nHost: a\r\n\r\n', 400],
    ['an absolute-form target', 'GET http://evil.example/a HTTP/1.1\r\nHost: a\r\n\r\n', 400],
    ['HTTP/2.0', 'GET /a HTTP/2.0\r\nHost: a\r\n\r\n', 505],
    ['a head over 16 KiB', `GET /a HTTP/1.1\r\nHost: a\r\nX-Long: ${'x'.repeat(17 * 1024)}\r\n\r\n`, 431],
    ['a head over 16 KiB not yet complete', `GET /a HTTP/1.1\r\nHost: a\r\nX-Long: ${'x'.repeat(17 * 1024)}`, 431],
    ['more than 100 header lines', `GET /a HTTP/1.1\r\nHost: a\r\n${'X-A: 1\r\n'.repeat(101)}\r\n`, 431],
  ];
  for (const [what, request, status] of refusals) {
    it(`refuses ${what} with ${status}, and closes the connection`, async () => {
      const conn = await RawConnection.open(server.url);
      try {
        await conn.write(request);
        const res = await conn.response(1);
        expect(res?.status).to.equal(status);
        expect(res!.headers.connection).to.equal('close');
        expect(await conn.closedByServer()).to.equal(true);
        expect(seen).to.have.length(0);
      } finally {
        conn.destroy();
      }
    });
  }

  it('answers 408 to a head that does not come in time, and closes an idle connection', async () => {
    const slow = await RawConnection.open(server.url);
    try {
      await slow.write('GET /a HTTP/1.1\r\nHo');
      expect((await slow.response(1, 3000))?.status).to.equal(408);
    } finally {
      slow.destroy();
    }
    const idle = await RawConnection.open(server.url);
    try {
      expect(await idle.closedByServer(3000)).to.equal(true);
    } finally {
      idle.destroy();
    }
  });

  it('answers 500 when the handler throws or its answer fails, and reports the error', async () => {
    handler = (req) => {
      if (req.target === '/throw') throw new Error('thrown');
      return Promise.reject(new Error('rejected'));
    };
    expect((await rawRequest(server.url, 'GET /throw HTTP/1.1\r\nHost: h\r\n\r\n'))?.status).to.equal(500);
    expect((await rawRequest(server.url, 'GET /reject HTTP/1.1\r\nHost: h\r\n\r\n'))?.status).to.equal(500);
    expect(errors.map((e) => (e as Error).message)).to.deep.equal(['thrown', 'rejected']);
  });

  it('on close, answers the request in hand and ends its connection; idle connections are cut at once', async () => {
    let release!: () => void;
    handler = () => new Promise<LeanAnswer>((resolve) => (release = () => resolve(ok('late'))));
    const busy = await RawConnection.open(server.url);
    const idle = await RawConnection.open(server.url);
    try {
      await busy.write('GET /a HTTP/1.1\r\nHost: h\r\n\r\n');
      while (seen.length === 0) await new Promise((r) => setTimeout(r, 5));
      const closing = server.close(2000);
      expect(await idle.closedByServer(1000)).to.equal(true);
      release();
      expect(await busy.response(1)).to.include({ status: 200, text: 'late' });
      await closing;
      expect(await busy.closedByServer(1000)).to.equal(true);
    } finally {
      busy.destroy();
      idle.destroy();
    }
  });
});
