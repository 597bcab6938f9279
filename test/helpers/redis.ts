/**
 * A real Redis server for tests, on 127.0.0.1 on a free port, from Debian's `redis-server`
 * package (`/usr/bin/redis-server`, or `redis-server` on `PATH` elsewhere). Nothing is kept:
 * no RDB snapshots, no append-only file, its working directory a temp dir removed at stop.
 *
 *   let redis: RedisServer;
 *   before(async () => (redis = await startRedis()));
 *   after(() => redis?.stop());
 *
 * stop() waits for the process to exit, so a spec file leaves no child behind. No binary is an
 * error that names the Debian package; `haveRedis()` tells beforehand.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

export interface RedisServer {
  /** `redis://127.0.0.1:<port>` */
  url: string;
  port: number;
  pid: number;
  /** The temp dir (its working directory and `redis.log`); removed by stop(). */
  dir: string;
  /** Stops it and waits for the exit (SIGTERM, SIGKILL after 10 s); removes the temp dir. Idempotent. */
  stop(): Promise<void>;
  /** SIGSTOP: it keeps its port but answers nothing (a hung server); `resume()` undoes it. */
  freeze(): void;
  resume(): void;
}

const DEBIAN_BIN = '/usr/bin/redis-server';
const READY_MS = 10_000;
const STOP_MS = 10_000;

/** The redis-server binary: Debian's first, then `PATH`. */
export function findRedisServer(): string | undefined {
  const candidates = [
    DEBIAN_BIN,
    ...(process.env.PATH ?? '')
      .split(delimiter)
      .filter((dir) => dir !== '')
      .map((dir) => join(dir, 'redis-server')),
  ];
  return candidates.find(isExecutable);
}

export function haveRedis(): boolean {
  return findRedisServer() !== undefined;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
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
process.on('exit', () => {
  for (const [child, dir] of running) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

function exitOf(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}

/** Whether the server answers PING with +PONG. */
function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.on('data', (data: Buffer) => {
      reply += data.toString('latin1');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.once('connect', () => socket.write('PING\r\n'));
  });
}

/** Starts a server; a port taken between its choice and the bind is retried on another. */
export async function startRedis(): Promise<RedisServer> {
  const bin = findRedisServer();
  if (!bin) throw new Error('redis-server not found (/usr/bin/redis-server or PATH): install the Debian package redis-server (apt-get install redis-server)');
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOn(bin, await freePort());
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

async function startOn(bin: string, port: number): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'postilion-redis-'));
  const logPath = join(dir, 'redis.log');
  const logFd = openSync(logPath, 'a');
  const readLog = () => {
    try {
      return readFileSync(logPath, 'utf8');
    } catch {
      return '';
    }
  };
  // stdio to a file, not a pipe: nothing of the child stays open in this process once it exits.
  const child = spawn(
    bin,
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--protected-mode', 'yes'],
    { cwd: dir, stdio: ['ignore', logFd, logFd], env: { PATH: process.env.PATH } },
  );
  closeSync(logFd);
  running.set(child, dir);
  const exited = exitOf(child);
  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        // A frozen server must run again to act on the SIGTERM.
        child.kill('SIGCONT');
        child.kill('SIGTERM');
      }
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_MS);
      await exited;
      clearTimeout(timer);
      running.delete(child);
      rmSync(dir, { recursive: true, force: true });
    })());
  const deadline = Date.now() + READY_MS;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const log = readLog();
      await stop();
      throw new Error(`redis-server exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${log}`);
    }
    if (await pings(port)) break;
    if (Date.now() > deadline) {
      const log = readLog();
      await stop();
      throw new Error(`redis-server did not answer PING within ${READY_MS} ms:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    dir,
    stop,
    freeze: () => void child.kill('SIGSTOP'),
    resume: () => void child.kill('SIGCONT'),
  };
}
