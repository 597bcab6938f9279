/**
 * A real PostgreSQL server for tests, on loopback, started from the server binaries of Debian's
 * `postgresql` package (`/usr/lib/postgresql/<newest>/bin`), or from `PATH` elsewhere.
 *
 * A spec file starts one server in `before` and stops it in `after`; its tests take an empty
 * database each from `createDatabase()`:
 *
 *   let pg: PostgresServer;
 *   before(async () => (pg = await startPostgres()));
 *   after(() => pg?.stop());
 *   it('…', async () => { const url = await pg.createDatabase(); … });
 *
 * Starting one takes a second or two (initdb into a fresh temp dir, then the server). It is
 * made for speed, not safety: fsync, synchronous_commit and full_page_writes are off (unless
 * `durable`: a benchmark measures PostgreSQL as production runs it), and every connection from
 * loopback is trusted as any user without a password. It listens on 127.0.0.1 on a
 * free port and keeps its Unix socket in its temp dir, never in /var/run/postgresql.
 *
 * PostgreSQL refuses to run as root: as root, initdb and the server run as Debian's `postgres`
 * user (or `nobody`), which then owns the temp dir (made under os.tmpdir(), which that user must
 * be able to enter, as it can /tmp). No binaries is an error that names the Debian
 * package, so a cluster test fails on a machine without them; `havePostgres()` tells beforehand.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, chownSync, closeSync, constants, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import pg from 'pg';

export interface PostgresServer {
  /** A database made at start, empty: `postgres://postgres@127.0.0.1:<port>/postilion_test_<hex>`. */
  url: string;
  /** The `postgres` maintenance database, for statements about the server itself. */
  adminUrl: string;
  port: number;
  /** The postmaster's process id (a new one after resume()). */
  readonly pid: number;
  /** The temp dir holding the data directory, the socket and `postgres.log`; removed by stop(). */
  dir: string;
  /** Makes an empty database (a fresh `postilion_test_<hex>` unless named) and returns its URL. */
  createDatabase(name?: string): Promise<string>;
  /** Fast shutdown (SIGINT), SIGKILL if it has not exited within 10 s; then removes the temp dir. */
  stop(): Promise<void>;
  /**
   * Lets this process end with the server running, which then ends with it (as every server not
   * stopped does): for a server kept across spec files. It is no longer a handle that keeps the
   * event loop alive, nor one the leftovers hook counts.
   */
  unref(): void;
  /**
   * Stops the server as stop() does but keeps its data: its clients see the database go away (a
   * crash, a restart, a failover) until resume() starts it again on the same port.
   */
  halt(): Promise<void>;
  /** Starts a halted server again, on the same port with the same data; resolves once it answers. */
  resume(): Promise<void>;
}

/** The superuser initdb makes; trusted from loopback. */
const SUPERUSER = 'postgres';
const DEBIAN_ROOT = '/usr/lib/postgresql';
const READY_MS = 20_000;
const STOP_MS = 10_000;
const DATABASE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** The directory holding `initdb` and `postgres`: Debian's newest version first, then `PATH`. */
export function findPostgresBin(): string | undefined {
  const hasBoth = (dir: string): boolean => ['initdb', 'postgres'].every((bin) => isExecutable(join(dir, bin)));
  const versions = existsSync(DEBIAN_ROOT) ? readdirSync(DEBIAN_ROOT).filter((v) => /^\d+(\.\d+)?$/.test(v)) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  for (const version of versions) if (hasBoth(join(DEBIAN_ROOT, version, 'bin'))) return join(DEBIAN_ROOT, version, 'bin');
  return (process.env.PATH ?? '').split(delimiter).find((dir) => dir !== '' && hasBoth(dir));
}

/** Whether startPostgres() can find a server to start. */
export function havePostgres(): boolean {
  return findPostgresBin() !== undefined;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Who runs initdb and the server: this process's user, or an unprivileged one when it is root. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const entries = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'));
  for (const name of [SUPERUSER, 'nobody']) {
    const entry = entries.find((fields) => fields[0] === name);
    if (entry) return { uid: Number(entry[2]), gid: Number(entry[3]) };
  }
  throw new Error('running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as (it refuses to run as root)');
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Servers not yet stopped, killed when this process exits without stopping them. */
const running = new Map<ChildProcess, string>();
function killRunning(): void {
  // Immediate shutdown: the postmaster ends its backends and frees its shared memory by itself.
  for (const child of running.keys()) child.kill('SIGQUIT');
  // Its dir goes once it is gone (removed while it still wrote there, part of it stayed): an exit
  // handler cannot wait for events, so it sleeps until the lock file, removed last, is gone.
  const deadline = Date.now() + STOP_MS;
  for (const dir of running.values()) {
    while (existsSync(join(dir, 'data', 'postmaster.pid')) && Date.now() < deadline) Atomics.wait(PAUSE, 0, 0, 20);
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // Left in the temp dir: nothing to do about it while exiting.
    }
  }
}
/** Something to wait on synchronously (Atomics.wait), never notified. */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));
process.on('exit', killRunning);

function exitOf(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}

/** Runs a program as the server's user, its output appended to the log; rejects unless it exits 0. */
async function runToEnd(bin: string, args: string[], dir: string, logFd: number, user: { uid: number; gid: number } | undefined): Promise<void> {
  const child = spawn(bin, args, { cwd: dir, env: childEnv(), stdio: ['ignore', logFd, logFd], ...user });
  const code = await new Promise<number | null>((resolve, reject) => child.once('error', reject).once('exit', resolve));
  if (code !== 0) throw new Error(`${bin} exited ${code}:\n${readLog(dir)}`);
}

function childEnv(): NodeJS.ProcessEnv {
  // Nothing of this process's PG* variables: the server and initdb take only their arguments.
  return { PATH: process.env.PATH, LC_ALL: 'C', TZ: 'UTC' };
}

function readLog(dir: string): string {
  try {
    return readFileSync(join(dir, 'postgres.log'), 'utf8').slice(-4000);
  } catch {
    return '(no log)';
  }
}

/** Starts a server in a fresh temp dir and makes its first database; see the file's comment. */
export async function startPostgres(options: { durable?: boolean } = {}): Promise<PostgresServer> {
  const bin = findPostgresBin();
  if (!bin) {
    throw new Error(
      `PostgreSQL server binaries (initdb, postgres) not found in ${DEBIAN_ROOT}/<version>/bin or on PATH: ` +
        'install the Debian package postgresql (apt-get install postgresql), as .ci/run does',
    );
  }
  const user = serverUser();
  const dir = mkdtempSync(join(tmpdir(), 'postilion-pg-'));
  const logFd = openSync(join(dir, 'postgres.log'), 'a');
  let child: ChildProcess | undefined;
  try {
    if (user) chownSync(dir, user.uid, user.gid);
    const data = join(dir, 'data');
    await runToEnd(
      join(bin, 'initdb'),
      ['-D', data, '-U', SUPERUSER, '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync', '--no-instructions'],
      dir,
      logFd,
      user,
    );
    // A port found free may be taken before the server binds it: then another one, twice at most.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const settings = {
        listen_addresses: '127.0.0.1',
        port: String(port),
        unix_socket_directories: dir,
        max_connections: '200',
        ...(options.durable ? {} : { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' }),
      };
      const args = ['-D', data, ...Object.entries(settings).flatMap(([key, value]) => ['-c', `${key}=${value}`])];
      const launch = (fd: number): ChildProcess => {
        const started = spawn(join(bin, 'postgres'), args, { cwd: dir, env: childEnv(), stdio: ['ignore', fd, fd], ...user });
        running.set(started, dir);
        return started;
      };
      child = launch(logFd);
      let spawnError: Error | undefined;
      child.once('error', (err) => (spawnError = err));
      const started = await ready(child, port, dir);
      if (started) return await server(child, port, dir, launch);
      running.delete(child);
      if (attempt === 3 || spawnError || !/could not bind|Address already in use/.test(readLog(dir)))
        throw new Error(`postgres exited before it was ready (${spawnError?.message ?? `exit ${child.exitCode ?? child.signalCode}`}):\n${readLog(dir)}`);
    }
  } catch (err) {
    if (child) await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  } finally {
    // The children hold their own copies of the log's descriptor.
    closeSync(logFd);
  }
}

/** Waits until the server answers a query (true), or has exited (false); throws after READY_MS. */
async function ready(child: ChildProcess, port: number, dir: string): Promise<boolean> {
  const deadline = Date.now() + READY_MS;
  let exited = false;
  void exitOf(child).then(() => (exited = true));
  let last: unknown;
  while (Date.now() < deadline) {
    if (exited) return false;
    const client = new pg.Client({ connectionString: adminUrl(port), connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } catch (err) {
      // "the database system is starting up", or not yet listening.
      last = err;
    } finally {
      await client.end().catch(() => {});
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`postgres did not accept connections within ${READY_MS / 1000} s (${String(last)}):\n${readLog(dir)}`, { cause: last });
}

function adminUrl(port: number): string {
  return `postgres://${SUPERUSER}@127.0.0.1:${port}/postgres`;
}

async function stopChild(child: ChildProcess): Promise<void> {
  const exited = exitOf(child);
  child.kill('SIGINT');
  const timer = new Promise<'late'>((resolve) => setTimeout(resolve, STOP_MS, 'late').unref());
  if ((await Promise.race([exited, timer])) === 'late') {
    child.kill('SIGKILL');
    await exited;
  }
  running.delete(child);
}

async function server(first: ChildProcess, port: number, dir: string, launch: (logFd: number) => ChildProcess): Promise<PostgresServer> {
  let child = first;
  const admin = adminUrl(port);
  const createDatabase = async (name = `postilion_test_${randomBytes(6).toString('hex')}`): Promise<string> => {
    if (!DATABASE_NAME.test(name)) throw new Error(`not a plain database name: ${name}`);
    const client = new pg.Client({ connectionString: admin });
    try {
      await client.connect();
      // template0: nothing a test may have added to template1, and no wait on its connections.
      await client.query(`CREATE DATABASE "${name}" TEMPLATE template0`);
    } finally {
      await client.end();
    }
    return `postgres://${SUPERUSER}@127.0.0.1:${port}/${name}`;
  };
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    })());
  const halt = () => stopChild(child);
  const resume = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) throw new Error('resume(): the server is running (halt() it first)');
    const logFd = openSync(join(dir, 'postgres.log'), 'a');
    try {
      child = launch(logFd);
    } finally {
      closeSync(logFd);
    }
    if (!(await ready(child, port, dir))) throw new Error(`postgres did not start again on port ${port}:\n${readLog(dir)}`);
  };
  try {
    const url = await createDatabase();
    return {
      url,
      adminUrl: admin,
      port,
      get pid() {
        return child.pid!;
      },
      dir,
      createDatabase,
      stop,
      unref: () => child.unref(),
      halt,
      resume,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
