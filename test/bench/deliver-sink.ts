/**
 * The receiving end of test/bench/deliver.ts: Postfix's smtp-sink when it is installed, counting
 * messages with -c, else an smtp-server in the benchmark process that reads and drops them.
 * Both listen on 127.0.0.1 only.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, Socket, type AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { cpuSeconds } from './deliver-cpu.ts';

export interface Sink {
  name: string;
  port: number;
  /** Messages received so far (a "." answered or about to be). */
  count(): number;
  /** The sink's own CPU seconds, when it is a process of its own. */
  cpu(): number | null;
  close(): Promise<void>;
}

export function smtpSinkPath(): string | null {
  for (const path of ['/usr/sbin/smtp-sink', '/usr/bin/smtp-sink', '/usr/local/sbin/smtp-sink']) if (existsSync(path)) return path;
  try {
    return execFileSync('sh', ['-c', 'command -v smtp-sink'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

/** Postfix's smtp-sink, counting with -c (its counters line is rewritten in place on stdout). */
export async function startPostfixSink(path: string): Promise<Sink> {
  const port = await freePort();
  // Bounded like every load here: the sink exits on its own after an hour at most.
  const asRoot = process.getuid?.() === 0 ? ['-u', 'postfix'] : [];
  const proc = spawn('timeout', ['3600', path, ...asRoot, '-c', `127.0.0.1:${port}`, '4096'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let received = 0;
  let tail = '';
  let stderr = '';
  proc.stdout.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString('latin1')).slice(-200);
    const all = [...tail.matchAll(/mesg=(\d+)/g)];
    if (all.length > 0) received = Number(all[all.length - 1]![1]);
  });
  proc.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((done) => proc.once('exit', () => done()));
  process.once('exit', () => proc.kill());
  await until(`smtp-sink on port ${port} (${stderr})`, () => connects(port), 10_000, 50);
  const sinkPid = (): number | undefined => {
    try {
      return Number(readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, 'utf8').trim().split(/\s+/)[0]) || undefined;
    } catch {
      return undefined;
    }
  };
  const pid = sinkPid();
  return {
    name: `Postfix smtp-sink (${path}, -c, backlog 4096)`,
    port,
    count: () => received,
    cpu: () => cpuSeconds(pid),
    close: async () => {
      proc.kill();
      await exited;
    },
  };
}

function connects(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = new Socket();
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
    socket.connect(port, '127.0.0.1');
  });
}

/** The fallback: an smtp-server in this process that reads each message to its end and drops it. */
export async function startNodeSink(): Promise<Sink> {
  let received = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    size: 50 * 1024 * 1024,
    onData(stream, _session, callback) {
      stream.on('end', () => {
        received += 1;
        callback();
      });
      stream.resume();
    },
  });
  server.on('error', () => undefined);
  await new Promise<void>((done, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => done());
  });
  const { port } = server.server.address() as AddressInfo;
  return {
    name: 'smtp-server sink in the benchmark process (smtp-sink not installed or BENCH_SINK=node)',
    port,
    count: () => received,
    cpu: () => null,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}

/** A port of 127.0.0.1 that nothing listens on (at the time of asking). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Polls `probe` until it holds, failing after `timeoutMs`. */
export async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
