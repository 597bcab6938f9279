/**
 * The Postilion side of test/bench/deliver.ts: test/bench/deliver-server.ts in a child process,
 * its READY / stats protocol (serve.ts), and its HTTP API with the admin key.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');

export interface ServerInfo {
  url: string;
  key: string;
  path: string;
  domainPath: string;
  from: string;
  pid: number;
}

export interface ServerStats {
  batches: number;
  writes: number;
  running: number;
  ready: number;
}

export class PostilionChild {
  info!: ServerInfo;
  private readonly proc: ChildProcess;
  private readonly waiters: Array<{ prefix: string; resolve: (json: string) => void }> = [];
  private stderr = '';
  private readonly exited: Promise<void>;

  constructor(env: Record<string, string>, nodeArgs: string[]) {
    this.proc = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', resolve(HERE, 'deliver-server.ts')], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, TEST_LOG: 'silent', ...env },
    });
    this.exited = new Promise((done) => this.proc.once('exit', () => done()));
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      const at = this.waiters.findIndex((w) => line.startsWith(`${w.prefix} `));
      if (at >= 0) this.waiters.splice(at, 1)[0]!.resolve(line.slice(line.indexOf(' ') + 1));
    });
  }

  private next(prefix: string, ms: number): Promise<string> {
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => reject(new Error(`postilion: no ${prefix} line within ${ms} ms\n${this.stderr}`)), ms);
      const onExit = () => reject(new Error(`postilion exited (code ${this.proc.exitCode}) before ${prefix}\n${this.stderr}`));
      this.proc.once('exit', onExit);
      this.waiters.push({
        prefix,
        resolve: (json) => {
          clearTimeout(timer);
          this.proc.off('exit', onExit);
          resolvePromise(json);
        },
      });
    });
  }

  async ready(): Promise<ServerInfo> {
    this.info = JSON.parse(await this.next('READY', 60_000)) as ServerInfo;
    return this.info;
  }

  async stats(): Promise<ServerStats> {
    const line = this.next('STATS', 10_000);
    this.proc.stdin!.write('stats\n');
    return JSON.parse(await line) as ServerStats;
  }

  /** One API call with the admin key; `body` is the parsed JSON (`any`: the callers read several response shapes loosely). */
  async api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(this.info.url + path, {
      method,
      headers: { authorization: `Bearer ${this.info.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** SIGTERM (a clean stop: temp dirs removed, --cpu-prof written), SIGKILL if that hangs. */
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 30_000);
    await this.exited;
    clearTimeout(timer);
    this.proc.stdin!.destroy();
  }
}
