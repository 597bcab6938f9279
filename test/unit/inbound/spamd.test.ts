import { expect } from 'chai';
import { createServer, type Server } from 'node:net';
import { parseScore, spamdScore } from '../../../src/inbound/spamd.ts';

describe('spamd scores (SPAMC/1.5 CHECK)', () => {
  let server: Server | null = null;
  afterEach(async () => {
    await new Promise<void>((done) => (server ? server.close(() => done()) : done()));
    server = null;
  });

  /** A fake spamd on loopback: reads the request, answers `answer` (or nothing). */
  async function fake(answer: string | null): Promise<{ port: number; requests: string[] }> {
    const requests: string[] = [];
    server = createServer((socket) => {
      let got = '';
      socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
      socket.on('end', () => {
        requests.push(got);
        if (answer !== null) socket.end(answer);
      });
    });
    await new Promise<void>((done) => server!.listen(0, '127.0.0.1', () => done()));
    return { port: (server.address() as { port: number }).port, requests };
  }

  it('sends the message with its length and reads the score', async () => {
    const spamd = await fake('SPAMD/1.1 0 EX_OK\r\nSpam: True ; 7.3 / 5.0\r\n\r\n');
    const message = Buffer.from('Subject: hi\r\n\r\nbuy now\r\n');
    expect(await spamdScore({ host: '127.0.0.1', port: spamd.port }, message)).to.equal(7.3);
    expect(spamd.requests[0]).to.match(/^CHECK SPAMC\/1\.5\r\nContent-length: 24\r\n/);
    expect(spamd.requests[0]!.endsWith('\r\n\r\nSubject: hi\r\n\r\nbuy now\r\n')).to.equal(true);
  });

  it('is 0 when spamd is down, answers nothing, or answers an error or junk', async () => {
    expect(await spamdScore({ host: '127.0.0.1', port: 1 }, Buffer.from('x'))).to.equal(0);
    const silent = await fake(null);
    // The fake closes without an answer once the request is in.
    expect(await spamdScore({ host: '127.0.0.1', port: silent.port }, Buffer.from('x'))).to.equal(0);
    expect(parseScore('SPAMD/1.1 76 Bad header line\r\n')).to.equal(0);
    expect(parseScore('SPAMD/1.1 0 EX_OK\r\nSpam: False ; -1.5 / 5.0\r\n\r\n')).to.equal(-1.5);
    expect(parseScore('garbage')).to.equal(0);
    expect(parseScore('SPAMD/1.1 0 EX_OK\r\nSpam: True ; 1e999 / 5.0\r\n')).to.equal(0);
  });
});
