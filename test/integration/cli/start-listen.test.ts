import { expect } from 'chai';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from '../../helpers/child.ts';

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
        `smtp:\n  submission:\n    starttls_port: ${ports.starttls}\n    tls_port: ${ports.tls}`,
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
});
