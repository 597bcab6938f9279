/**
 * The Postilion side of test/bench/webhooks.ts and inbound.ts: test/bench/webhooks-server.ts in a
 * child process, a webhook receiver answering 204, and a few API helpers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { cpuSeconds } from './deliver-cpu.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');

export interface Info {
  url: string;
  key: string;
  accountId: string;
  messages: string;
  from: string;
  dir: string;
  /** With BENCH_INBOUND=1: the inbound MX's port. */
  inboundPort: number | null;
  pid: number;
}

/** test/bench/webhooks-server.ts in a child process. */
export class Daemon {
  info!: Info;
  private readonly proc: ChildProcess;
  /** Who waits for which answer: a line goes to the first waiter whose word it starts with (answers can cross: `stats count` takes a while). */
  private readonly lines: Array<{ word: string; take: (line: string) => void }> = [];
  private stderr = '';
  readonly exited: Promise<void>;

  constructor(env: Record<string, string>) {
    // BENCH_CPU_PROF=<dir>: the daemon runs under --cpu-prof (see cpuprofile-top.ts).
    const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
    this.proc = spawn(process.execPath, [...prof, '--import', 'tsx', join(HERE, 'webhooks-server.ts')], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, TEST_LOG: 'silent', ...env },
    });
    this.exited = new Promise((done) => this.proc.once('exit', () => done()));
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      const i = this.lines.findIndex((w) => line.startsWith(w.word));
      if (i >= 0) this.lines.splice(i, 1)[0]!.take(line);
    });
  }

  async ready(): Promise<Info> {
    const line = await this.next('', 120_000);
    if (!line.startsWith('READY ')) throw new Error(`daemon: ${line}\n${this.stderr}`);
    this.info = JSON.parse(line.slice(6)) as Info;
    return this.info;
  }

  async stats(count = false): Promise<{ running: number; ready: number; paused: number; jobs?: number; parked?: number }> {
    const line = this.next('STATS ', 120_000);
    this.proc.stdin!.write(count ? 'stats count\n' : 'stats\n');
    return JSON.parse((await line).slice(6));
  }

  /** The daemon's memory now, in MB (process.memoryUsage()). */
  async memory(): Promise<{ rss: number; heapTotal: number; heapUsed: number; external: number; arrayBuffers: number }> {
    const line = this.next('MEM ', 120_000);
    this.proc.stdin!.write('mem\n');
    return JSON.parse((await line).slice(4));
  }

  /** Suspends or resumes a destination of the engine (as `postilion queue suspend|resume`). */
  async command(line: string): Promise<void> {
    const answer = this.next('DONE ', 30_000);
    this.proc.stdin!.write(`${line}\n`);
    await answer;
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of many shapes, read loosely
  async api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(this.info.url + path, {
      method,
      headers: { authorization: `Bearer ${this.info.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** CPU time the daemon has used so far, every thread, in seconds (NaN where there is no /proc). */
  cpuSeconds(): number {
    return cpuSeconds(this.info.pid) ?? Number.NaN;
  }

  /** Peak resident memory so far (VmHWM), in MB. */
  peakRssMb(): number {
    return peakRss(this.info.pid);
  }

  kill(): Promise<void> {
    this.proc.kill('SIGKILL');
    return this.exited;
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 30_000);
    await this.exited;
    clearTimeout(timer);
  }

  private next(word: string, ms: number): Promise<string> {
    return new Promise((resolveLine, reject) => {
      const timer = setTimeout(() => reject(new Error(`daemon: no answer within ${ms} ms\n${this.stderr}`)), ms);
      this.lines.push({
        word,
        take: (line) => {
          clearTimeout(timer);
          resolveLine(line);
        },
      });
    });
  }
}

export function peakRss(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

/** The resident set now, in MB: anonymous memory (heap, LevelDB's own) and file-backed pages (mapped table files, the binary). */
export function rssParts(pid: number): { anonMb: number; fileMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
  return { anonMb: kb('RssAnon') / 1024, fileMb: kb('RssFile') / 1024 };
}

/** A webhook receiver answering 204 to everything; counts requests. */
export async function startReceiver(): Promise<{ port: number; count: () => number; reset: () => void; server: Server }> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received += 1;
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', () => done()));
  return { port: (server.address() as AddressInfo).port, count: () => received, reset: () => (received = 0), server };
}

export async function createWebhook(d: Daemon, url: string, flags: Record<string, boolean>): Promise<void> {
  const res = await d.api('POST', `/v2/accounts/${d.info.accountId}/webhooks`, { name: 'bench', url, scope: 'global', ...flags });
  if (res.status !== 201) throw new Error(`webhook: HTTP ${res.status} ${JSON.stringify(res.body)}`);
}
