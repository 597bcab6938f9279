import { expect } from 'chai';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../../src/cli/main.ts';
import { startServer, type TestServer } from '../../helpers/harness.ts';

/** The daemon's control socket: private, gone after a stop, and a crash's leftover handled. */
describe('control socket', function () {
  this.timeout(20_000);
  let dir: string;
  let server: TestServer | null = null;
  let socket: string;
  let configPath: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-control-'));
    socket = join(dir, 'data', 'control.sock');
    configPath = join(dir, 'postilion.yaml');
    writeFileSync(configPath, `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\nlog:\n  level: silent\n`);
  });
  afterEach(async () => {
    await server?.stop();
    server = null;
    rmSync(dir, { recursive: true, force: true });
  });

  async function status(): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await main(['node', 'postilion', '--config', configPath, 'queue', 'status'], { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  }

  /** A socket file nobody listens on, as a daemon killed with SIGKILL leaves it. */
  async function leaveStaleSocket(): Promise<void> {
    mkdirSync(join(dir, 'data'), { recursive: true });
    const listener = createServer();
    const elsewhere = join(dir, 'other.sock');
    await new Promise<void>((resolve) => listener.listen(elsewhere, resolve));
    renameSync(elsewhere, socket);
    await new Promise<void>((resolve) => listener.close(() => resolve()));
    expect(statSync(socket).isSocket()).to.equal(true);
  }

  it('is a socket only its owner can use, served while the daemon runs and removed when it stops', async () => {
    server = await startServer({ dir });
    const stat = statSync(socket);
    expect(stat.isSocket()).to.equal(true);
    expect(stat.mode & 0o777).to.equal(0o600);
    const running = await status();
    expect(running.code, running.err).to.equal(0);
    expect(running.out).to.match(/^daemon: running, delivery disabled/m);
    await server.daemon.stop();
    expect(existsSync(socket)).to.equal(false);
  });

  it('after a crash: the CLI reads the store past the dead socket, and the next start replaces it', async () => {
    await leaveStaleSocket();
    const stopped = await status();
    expect(stopped.code, stopped.err).to.equal(0);
    expect(stopped.out).to.match(/^daemon: not running/m);
    server = await startServer({ dir });
    expect((await status()).out).to.match(/^daemon: running/m);
  });

  it('refuses to start over a file that is not a socket', async () => {
    mkdirSync(join(dir, 'data'), { recursive: true });
    writeFileSync(socket, 'not a socket');
    let failure: Error | null = null;
    await startServer({ dir }).catch((err: Error) => (failure = err));
    expect(String(failure)).to.contain('exists and is not a socket');
  });
});
