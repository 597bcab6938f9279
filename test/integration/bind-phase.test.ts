import { expect } from 'chai';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bindListeners, ListenError, type BoundListeners } from '../../src/bind-phase.ts';
import { validateConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { Daemon } from '../../src/daemon.ts';
import { createLogger } from '../../src/logging/logger.ts';
import { BoundSocket } from '../../src/util/bound-socket.ts';

/** What a raw connection to 127.0.0.1:port receives after sending `text`, until the server closes it or `until` matches. */
function exchange(port: number, text: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let got = '';
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (until.test(got)) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(got));
    if (text) socket.write(text);
  });
}

/** GET on the control socket; its status. */
function controlStatus(path: string, url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: path, path: url, method: 'GET' }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the bind phase', function () {
  this.timeout(30_000);
  let dir: string;
  let daemon: Daemon | null = null;
  let bound: BoundListeners | null = null;
  const held: Server[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-bind-'));
  });
  afterEach(async () => {
    await daemon?.stop();
    daemon = null;
    await bound?.close();
    bound = null;
    for (const server of held.splice(0)) await new Promise((done) => server.close(done));
    rmSync(dir, { recursive: true, force: true });
  });

  function config(): Config {
    return validateConfig(
      {
        log: { level: 'silent' },
        data: { dir: join(dir, 'data') },
        keys: { dir: join(dir, 'keys') },
        api: { port: 0 },
        delivery: { enabled: false },
        smtp: { submission: { starttls_port: 0, tls_port: null }, inbound: { port: 0 } },
        metrics: { port: 0 },
        tracking: { port: 0 },
        shutdown: { grace_seconds: 1 },
      },
      'test',
    );
  }

  it('binds every listener before the store is opened or a key made, and the daemon serves on those very sockets what came meanwhile', async () => {
    const c = config();
    bound = await bindListeners(c);
    // Bound, and nothing else: the data directory holds only the control socket, no key exists.
    expect(readdirSync(join(dir, 'data'))).to.deep.equal(['control.sock']);
    expect(existsSync(join(dir, 'keys'))).to.equal(false);

    // Clients that connect now wait, unanswered, until the daemon has started.
    const api = exchange(bound.api.address.port, 'GET /v2/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', /\r\n\r\n[\s\S]*\}/);
    const inbound = exchange(bound.smtpInbound!.address.port, '', /^220 .*\r\n/);
    const submission = exchange(bound.smtpStarttls!.address.port, '', /^220 .*\r\n/);
    const metrics = exchange(bound.metrics!.address.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', /ok\n/);
    const tracking = exchange(Number(new URL(bound.tracking!.url).port), 'GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', /\r\n\r\n[\s\S]+/);
    const control = controlStatus(join(dir, 'data', 'control.sock'), '/v1/queue/status');
    let answered = false;
    void Promise.race([api, inbound, submission, metrics, tracking, control]).then(() => (answered = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(answered, 'nothing is answered before the store is open').to.equal(false);

    const ports = { api: bound.api.address.port, inbound: bound.smtpInbound!.address.port, submission: bound.smtpStarttls!.address.port };
    daemon = await Daemon.start({ config: c, log: createLogger('silent'), announce: () => {}, bound });
    bound = null;

    expect(await api).to.match(/^HTTP\/1\.1 401 /);
    expect(await inbound).to.match(/^220 /);
    expect(await submission).to.match(/^220 /);
    expect(await metrics).to.match(/^HTTP\/1\.1 200 /);
    expect(await tracking).to.match(/^HTTP\/1\.1 404 /);
    expect(await control).to.equal(200);
    expect(new URL(daemon.parts.api.url).port).to.equal(String(ports.api));
    expect(daemon.parts.inbound.port).to.equal(ports.inbound);
    expect(daemon.parts.submission.ports).to.deep.equal([{ port: ports.submission, secure: false }]);
  });

  it('lets go of what it bound when a later listener is busy, naming that one', async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    held.push(busy);
    const port = (busy.address() as { port: number }).port;
    const c = config();
    // The API (bound before metrics) on a port of its own, to see it let go.
    const apiPort = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const p = (probe.address() as { port: number }).port;
        probe.close(() => resolve(p));
      });
    });
    const failing = { ...c, api: { ...c.api, port: apiPort }, metrics: { ...c.metrics, port } };

    let error: unknown = null;
    try {
      bound = await bindListeners(failing);
    } catch (err) {
      error = err;
    }
    expect(error).to.be.instanceOf(ListenError);
    expect((error as Error).message).to.equal(`cannot listen on 127.0.0.1:${port} (metrics): address already in use`);
    const again = await BoundSocket.bind('127.0.0.1', apiPort);
    await again.close();
    expect(existsSync(join(dir, 'data')), 'the control socket (last) was never made').to.equal(false);
  });

  it('a bound socket closed before any server took it cuts the connections waiting on it and frees its port', async () => {
    const socket = await BoundSocket.bind('127.0.0.1', 0);
    const { port } = socket.address;
    const waiting = exchange(port, 'hello', /never/);
    await new Promise((r) => setTimeout(r, 100));
    await socket.close();
    expect(await waiting).to.equal('');
    const again = await BoundSocket.bind('127.0.0.1', port);
    expect(again.address.port).to.equal(port);
    await again.close();
    let error: NodeJS.ErrnoException | null = null;
    const holder = await BoundSocket.bind('127.0.0.1', 0);
    try {
      await BoundSocket.bind('127.0.0.1', holder.address.port);
    } catch (err) {
      error = err as NodeJS.ErrnoException;
    }
    await holder.close();
    expect(error?.code).to.equal('EADDRINUSE');
  });
});
