import { expect } from 'chai';
import { startServer, type TestServer } from '../../helpers/harness.ts';
import { RawConnection, type RawResponse } from '../../helpers/raw-http.ts';

const MiB = 1024 * 1024;

describe('request bodies held in memory (api.body_memory_bytes)', function () {
  this.timeout(60_000);

  describe('with a cap of 8 MiB', () => {
    let server: TestServer;
    const lines: string[] = [];
    before(async () => {
      server = await startServer({ logLines: lines, config: { api: { body_memory_bytes: 8 * MiB, body_limit_bytes: 6 * MiB } } });
    });
    after(async () => server.stop());

    const head = (extra: string) =>
      `POST /v2/accounts/${server.accountId}/api-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.adminKey}\r\n` +
      `Content-Type: application/json\r\n${extra}\r\n`;
    /** Opens a request declaring `bytes` with Expect: 100-continue; resolves with the first answer. */
    async function declare(bytes: number): Promise<{ conn: RawConnection; first: RawResponse | null }> {
      const conn = await RawConnection.open(server.url);
      await conn.write(head(`Content-Length: ${bytes}\r\nExpect: 100-continue\r\n`));
      return { conn, first: await conn.response(1) };
    }
    const isBusy = (res: RawResponse | null) => {
      expect(res?.status).to.equal(503);
      expect(res?.headers['retry-after']).to.equal('1');
      expect(res?.json).to.deep.equal({ message: 'the server is receiving too many request bodies at once, retry later' });
    };

    it('refuses with 503 and Retry-After a body that would go past the cap, and admits it once memory is given back', async () => {
      const a = await declare(5 * MiB);
      expect(a.first?.status).to.equal(100);

      // Declared: refused before a byte of it is sent.
      isBusy((await declare(5 * MiB)).first);

      // Declared, sent anyway without waiting: refused, the body read and dropped, the connection still usable.
      const eager = await RawConnection.open(server.url);
      await eager.write(Buffer.concat([Buffer.from(head(`Content-Length: ${5 * MiB}\r\n`)), Buffer.alloc(5 * MiB, 'x')]));
      isBusy(await eager.response(1));
      await eager.write(`GET /v2/ping HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.adminKey}\r\n\r\n`);
      expect((await eager.response(2))?.status).to.equal(200);
      eager.destroy();

      // Chunked: refused when it grows past the cap.
      const chunked = await RawConnection.open(server.url);
      await chunked.write(head('Transfer-Encoding: chunked\r\n'));
      for (let i = 0; i < 4 && chunked.responses.length === 0; i++) {
        await chunked.write(`${MiB.toString(16)}\r\n${'x'.repeat(MiB)}\r\n`);
        await new Promise((r) => setTimeout(r, 20));
      }
      isBusy(await chunked.response(1));
      chunked.destroy();

      // The first one finishes (its body is no JSON: 400, but it was read).
      await a.conn.write(Buffer.alloc(5 * MiB, 'x'));
      expect((await a.conn.response(2))?.status).to.equal(400);
      a.conn.destroy();

      const next = await declare(5 * MiB);
      expect(next.first?.status).to.equal(100);
      await next.conn.write(Buffer.alloc(5 * MiB, 'x'));
      expect((await next.conn.response(2))?.status).to.equal(400);
      next.conn.destroy();
    });

    it('gives the memory of a client that goes away mid-body back at once', async () => {
      lines.length = 0;
      const gone = await declare(5 * MiB);
      expect(gone.first?.status).to.equal(100);
      await gone.conn.write('0123456789');
      gone.conn.destroy();
      const deadline = Date.now() + 3_000;
      while (!lines.some((l) => JSON.parse(l).status === 499) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      const after = await declare(5 * MiB);
      expect(after.first?.status).to.equal(100);
      after.conn.destroy();
    });

    it('answers some of several parallel 5 MiB bodies with 503 and keeps serving', async () => {
      const body = Buffer.alloc(5 * MiB, 'x');
      const statuses = await Promise.all(
        Array.from({ length: 6 }, async () => {
          const res = await fetch(`${server.url}/v2/accounts/${server.accountId}/api-keys`, {
            method: 'POST',
            headers: { authorization: `Bearer ${server.adminKey}`, 'content-type': 'application/json' },
            body,
          });
          await res.arrayBuffer();
          return res.status;
        }),
      );
      expect(statuses.filter((s) => s === 503).length, statuses.join()).to.be.at.least(1);
      expect(statuses.filter((s) => s === 400).length, statuses.join()).to.be.at.least(1);
      expect(
        statuses.every((s) => s === 503 || s === 400),
        statuses.join(),
      ).to.equal(true);
      const ping = await fetch(`${server.url}/v2/ping`, { headers: { authorization: `Bearer ${server.adminKey}` } });
      expect(ping.status).to.equal(200);
    });
  });

  describe('with the defaults (25 MiB per body, 256 MiB in all)', () => {
    let server: TestServer;
    let v1Key: string;
    before(async () => {
      server = await startServer();
      v1Key = (await server.daemon.core.apiKeys.create(server.accountId, { label: 'v1', scopes: ['messages:send:all'], kind: 'v1' })).secret;
    });
    after(async () => server.stop());

    const size = 25 * MiB;
    const cap = 256 * MiB;
    /** Sends 50 requests of `size` bytes at once; the process's RSS before, at its peak and after. */
    async function flood(head: string) {
      const body = Buffer.alloc(size, 'x');
      const before = process.memoryUsage().rss;
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
      const started = Date.now();
      const statuses = await Promise.all(
        Array.from({ length: 50 }, async () => {
          const conn = await RawConnection.open(server.url);
          try {
            await conn.write(`${head}Content-Length: ${size}\r\n\r\n`);
            await conn.write(body);
            return (await conn.response(1, 60_000))?.status ?? 0;
          } finally {
            conn.destroy();
          }
        }),
      );
      clearInterval(sampler);
      peak = Math.max(peak, process.memoryUsage().rss);
      const after = process.memoryUsage().rss;
      const counts: Record<number, number> = {};
      for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
      const mb = (n: number) => Math.round(n / 1e6);
      console.log(
        `      rss before ${mb(before)} MB, peak ${mb(peak)} MB (+${mb(peak - before)} MB), after ${mb(after)} MB; ${Date.now() - started} ms; statuses ${JSON.stringify(counts)}`,
      );
      return { growth: peak - before, counts };
    }

    it('keeps the memory of 50 parallel 25 MiB bodies within the cap plus 150 MB (bodies refused unread)', async () => {
      // v1 refuses a non-JSON body before decoding it: what is measured is what the cap governs.
      const { growth, counts } = await flood(`POST /v1/email/send HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${v1Key}\r\nContent-Type: text/plain\r\n`);
      expect(Object.keys(counts).sort(), JSON.stringify(counts)).to.deep.equal(['400', '503']);
      expect(growth).to.be.below(cap + 150e6);
    });

    it('keeps the memory of 50 parallel 25 MiB JSON bodies within twice the cap plus 150 MB (each decoded once)', async () => {
      // parseBody decodes each admitted body into a string of the same size before JSON.parse.
      const { growth, counts } = await flood(
        `POST /v2/accounts/${server.accountId}/api-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.adminKey}\r\nContent-Type: application/json\r\n`,
      );
      expect(Object.keys(counts).sort(), JSON.stringify(counts)).to.deep.equal(['400', '503']);
      expect(growth).to.be.below(2 * cap + 150e6);
    });
  });
});
