import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Child, run } from '../../helpers/child.ts';

/** Listens on 127.0.0.1 (port 0: any free one) and resolves with the server. */
function listen(port = 0): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

const portOf = (server: Server) => (server.address() as { port: number }).port;
const close = (server: Server) => new Promise<void>((done) => server.close(() => done()));

/** A port that was free a moment ago. */
async function freePort(): Promise<number> {
  const server = await listen();
  const port = portOf(server);
  await close(server);
  return port;
}

/** Whether 127.0.0.1:port can be bound now, i.e. nothing (no daemon left behind) holds it. */
async function bindable(port: number): Promise<boolean> {
  try {
    await close(await listen(port));
    return true;
  } catch {
    return false;
  }
}

describe('postilion start: a listener address that cannot be bound', function () {
  this.timeout(30_000);
  let dir: string;
  let configPath: string;
  const held: Server[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-listen-'));
    configPath = join(dir, 'postilion.yaml');
  });
  afterEach(async () => {
    for (const server of held.splice(0)) await close(server);
    rmSync(dir, { recursive: true, force: true });
  });

  function writeConfig(ports: { starttls: number; tls: number; api: number; metrics: number }): void {
    writeFileSync(
      configPath,
      [
        `data:\n  dir: ${join(dir, 'data')}`,
        `keys:\n  dir: ${join(dir, 'keys')}`,
        `api:\n  port: ${ports.api}`,
        `metrics:\n  port: ${ports.metrics}`,
        // The inbound listener on any free port: its default, 2525, may be taken on this machine.
        `smtp:\n  submission:\n    starttls_port: ${ports.starttls}\n    tls_port: ${ports.tls}\n  inbound:\n    port: 0`,
        '',
      ].join('\n'),
    );
  }

  it('is one line and exit status 2, before any listener, the store or delivery has started', async () => {
    // The metrics listener is the daemon's last: had it bound in order, SMTP and the API would be
    // up and delivery running when it failed.
    const busy = await listen();
    held.push(busy);
    const ports = { starttls: await freePort(), tls: await freePort(), api: await freePort(), metrics: portOf(busy) };
    writeConfig(ports);

    const res = await run(['--config', configPath, 'start'], dir, { POSTILION_METRICS__PORT: String(ports.metrics) });

    expect(res.code).to.equal(2);
    expect(res.stderr).to.equal(`postilion: cannot listen on 127.0.0.1:${ports.metrics} (metrics): address already in use\n`);
    // No log line at all: nothing was started, so nothing had to be stopped.
    expect(res.stdout).to.equal('');
    expect(existsSync(join(dir, 'data')), 'the store was not opened').to.equal(false);
    for (const port of [ports.starttls, ports.tls, ports.api]) expect(await bindable(port), `port ${port}`).to.equal(true);
  });

  it('names the first listener that is in use, whichever it is', async () => {
    const busy = await listen();
    held.push(busy);
    const ports = { starttls: await freePort(), tls: portOf(busy), api: await freePort(), metrics: await freePort() };
    writeConfig(ports);

    const res = await run(['--config', configPath, 'start'], dir, { POSTILION_METRICS__PORT: String(ports.metrics) });

    expect(res.code).to.equal(2);
    expect(res.stderr).to.equal(`postilion: cannot listen on 127.0.0.1:${ports.tls} (smtp-tls): address already in use\n`);
    for (const port of [ports.starttls, ports.api, ports.metrics]) expect(await bindable(port), `port ${port}`).to.equal(true);
  });

  it('refuses a configuration that puts two listeners on one address the same way', async () => {
    const port = await freePort();
    writeConfig({ starttls: 0, tls: 0, api: port, metrics: port });

    const res = await run(['--config', configPath, 'start'], dir, { POSTILION_METRICS__PORT: String(port) });

    expect(res.code).to.equal(2);
    expect(res.stderr).to.equal(`postilion: cannot listen on 127.0.0.1:${port} (metrics): address already in use\n`);
    expect(await bindable(port)).to.equal(true);
  });

  /**
   * Every listener on, each on port 0 (any free port) but the one under test, which is held busy
   * here; the environment of Child sets the metrics and tracking ports, so they are set there.
   */
  const LISTENERS: Array<{ name: string; env: (port: number) => Record<string, string> }> = [
    { name: 'smtp-starttls', env: (port) => ({ POSTILION_SMTP__SUBMISSION__STARTTLS_PORT: String(port) }) },
    { name: 'smtp-tls', env: (port) => ({ POSTILION_SMTP__SUBMISSION__TLS_PORT: String(port) }) },
    { name: 'smtp-inbound', env: (port) => ({ POSTILION_SMTP__INBOUND__PORT: String(port) }) },
    { name: 'api', env: (port) => ({ POSTILION_API__PORT: String(port) }) },
    { name: 'api-tls', env: (port) => ({ POSTILION_API__TLS__PORT: String(port) }) },
    { name: 'metrics', env: (port) => ({ POSTILION_METRICS__PORT: String(port) }) },
    { name: 'tracking', env: (port) => ({ POSTILION_TRACKING__PORT: String(port) }) },
  ];

  function writeAllOnConfig(): void {
    writeFileSync(
      configPath,
      [
        `data:\n  dir: ${join(dir, 'data')}`,
        `keys:\n  dir: ${join(dir, 'keys')}`,
        // The API's TLS files are read once the listeners are bound, which is never here.
        'api:\n  port: 0\n  tls:\n    enabled: true\n    port: 0',
        'metrics:\n  enabled: true\n  port: 0',
        'tracking:\n  enabled: true\n  port: 0',
        'smtp:\n  submission:\n    enabled: true\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    enabled: true\n    port: 0',
        '',
      ].join('\n'),
    );
  }

  for (const listener of LISTENERS) {
    it(`a busy ${listener.name} port: one line naming it and its address, exit 2, no store opened and no file made`, async () => {
      const busy = await listen();
      held.push(busy);
      writeAllOnConfig();

      const res = await run(['--config', configPath, 'start'], dir, listener.env(portOf(busy)));

      expect(res.stderr).to.equal(`postilion: cannot listen on 127.0.0.1:${portOf(busy)} (${listener.name}): address already in use\n`);
      expect(res.code).to.equal(2);
      expect(res.stdout, 'no log line: nothing was started').to.equal('');
      expect(existsSync(join(dir, 'data')), 'the data directory (store, control socket) was not made').to.equal(false);
      expect(existsSync(join(dir, 'keys')), 'no key or certificate was made').to.equal(false);
      expect(readdirSync(dir)).to.deep.equal(['postilion.yaml']);
    });
  }

  it('a control socket a daemon answers on: one line naming it, exit 2, no store opened and no file made', async () => {
    const data = join(dir, 'data');
    mkdirSync(data);
    const socket = join(data, 'control.sock');
    const busy = await new Promise<Server>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(socket, () => resolve(server));
    });
    held.push(busy);
    writeAllOnConfig();

    const res = await run(['--config', configPath, 'start'], dir);

    expect(res.stderr).to.equal(
      `postilion: cannot listen on ${socket} (control): address already in use: data directory ${data} is in use by another process (a postilion daemon answers on its control socket)\n`,
    );
    expect(res.code).to.equal(2);
    expect(res.stdout).to.equal('');
    expect(readdirSync(data), 'no store files beside the socket').to.deep.equal(['control.sock']);
    expect(existsSync(join(dir, 'keys'))).to.equal(false);
  });

  it('a control socket left over from a crash (nobody answers) is replaced, and the daemon starts', async () => {
    const data = join(dir, 'data');
    mkdirSync(data);
    const socket = join(data, 'control.sock');
    // A socket file with no process behind it: a process that bound it and was killed.
    spawnSync(process.execPath, ['-e', "require('node:net').createServer().listen(process.argv[1], () => process.kill(process.pid, 'SIGKILL'))", socket]);
    expect(existsSync(socket)).to.equal(true);
    writeFileSync(
      configPath,
      [
        `data:\n  dir: ${data}`,
        `keys:\n  dir: ${join(dir, 'keys')}`,
        'api:\n  port: 0',
        'smtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\ndelivery:\n  enabled: false',
        '',
      ].join('\n'),
    );
    const child = new Child(['--config', configPath, 'start'], dir);
    try {
      await child.waitFor(/"msg":"control socket listening"/);
      // The bootstrap key is the start's last word: the signal handlers are in place.
      await child.waitFor(/aha-sk-/);
      child.signal('SIGTERM');
      expect(await child.exited).to.equal(0);
    } finally {
      await child.kill();
    }
  });
});
