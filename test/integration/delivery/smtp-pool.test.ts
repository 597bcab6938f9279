import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import type { Hop } from '../../../src/delivery/router.ts';
import { SmtpPool } from '../../../src/delivery/smtp-pool.ts';

/**
 * A minimal SMTP server on loopback that logs every command per connection, so the tests can see
 * what the pool sends between messages. `rset` decides how RSET is answered.
 */
async function scriptedServer(rset: (socket: Socket) => void = (s) => s.write('250 2.0.0 Ok\r\n')) {
  const sessions: string[][] = [];
  const server: Server = createServer((socket) => {
    const log: string[] = [];
    sessions.push(log);
    let data = false;
    let buffered = '';
    socket.write('220 test ESMTP\r\n');
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      for (;;) {
        if (data) {
          const end = buffered.indexOf('\r\n.\r\n');
          if (end < 0) return;
          buffered = buffered.slice(end + 5);
          data = false;
          socket.write('250 2.0.0 Queued\r\n');
          continue;
        }
        const eol = buffered.indexOf('\r\n');
        if (eol < 0) return;
        const line = buffered.slice(0, eol);
        buffered = buffered.slice(eol + 2);
        const verb = line.split(/[ :]/)[0]!.toUpperCase();
        log.push(verb);
        if (verb === 'EHLO') socket.write('250-test\r\n250 8BITMIME\r\n');
        else if (verb === 'DATA') {
          data = true;
          socket.write('354 Go on\r\n');
        } else if (verb === 'RSET') rset(socket);
        else if (verb === 'QUIT') socket.end('221 Bye\r\n');
        else socket.write('250 2.1.0 Ok\r\n');
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const hop: Hop = { name: '127.0.0.1', address: '127.0.0.1', port: (server.address() as AddressInfo).port, tls: 'off' };
  return { sessions, hop, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const MESSAGE = Buffer.from('From: a@example.com\r\nTo: b@example.org\r\nSubject: x\r\n\r\nHello\r\n');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('SMTP pool', () => {
  let pool: SmtpPool;
  let server: Awaited<ReturnType<typeof scriptedServer>>;
  const options = {
    hostname: 'mx.postilion.test',
    messagesPerConnection: 100,
    idleTimeoutMs: 10_000,
    connectTimeoutMs: 5000,
    commandTimeoutMs: 5000,
    tlsRejectUnauthorized: false,
  };

  afterEach(async () => {
    pool.close();
    await server.close();
  });

  it('sends consecutive messages over one session without RSET in between', async () => {
    server = await scriptedServer();
    pool = new SmtpPool(options);
    for (let i = 0; i < 3; i++) expect((await pool.send(server.hop, 'a@example.com', `b${i}@example.org`, MESSAGE)).kind).to.equal('reply');
    expect(server.sessions).to.have.length(1);
    expect(server.sessions[0]).to.deep.equal(['EHLO', 'MAIL', 'RCPT', 'DATA', 'MAIL', 'RCPT', 'DATA', 'MAIL', 'RCPT', 'DATA']);
  });

  it('checks a session parked for longer than probeAfterMs with RSET before reusing it', async () => {
    server = await scriptedServer();
    pool = new SmtpPool({ ...options, probeAfterMs: 50 });
    await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE);
    await sleep(100);
    const reply = await pool.send(server.hop, 'a@example.com', 'c@example.org', MESSAGE);
    expect(reply).to.include({ kind: 'reply', code: 250 });
    expect(server.sessions).to.have.length(1);
    expect(server.sessions[0]).to.deep.equal(['EHLO', 'MAIL', 'RCPT', 'DATA', 'RSET', 'MAIL', 'RCPT', 'DATA']);
  });

  it('opens a new session when the parked one fails its RSET, and delivers over that', async () => {
    server = await scriptedServer((socket) => socket.end('421 4.4.2 Idle too long\r\n'));
    pool = new SmtpPool({ ...options, probeAfterMs: 50 });
    await pool.send(server.hop, 'a@example.com', 'b@example.org', MESSAGE);
    await sleep(100);
    const reply = await pool.send(server.hop, 'a@example.com', 'c@example.org', MESSAGE);
    expect(reply).to.include({ kind: 'reply', code: 250 });
    expect(server.sessions).to.have.length(2);
    expect(server.sessions[1]).to.deep.equal(['EHLO', 'MAIL', 'RCPT', 'DATA']);
  });
});
