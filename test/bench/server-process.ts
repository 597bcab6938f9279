/**
 * A benchmark's server in a child process (test/bench/serve.ts protocol): it prints `READY <json>`
 * once listening and answers `stats` on stdin with `STATS <json>`. Shared by the benchmarks.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');

export class ServerProcess<Info extends { pid: number }, Stats> {
  info!: Info;
  private readonly proc: ChildProcess;
  private readonly waiters: Array<{ prefix: string; resolve: (json: string) => void }> = [];
  private stderr = '';
  private readonly exited: Promise<void>;

  /** Runs test/bench/`script` with `nodeArgs` (e.g. --cpu-prof) and `env` over this process's. */
  constructor(
    readonly name: string,
    script: string,
    options: { nodeArgs?: string[]; env?: Record<string, string>; killAfterMs?: number } = {},
  ) {
    this.killAfterMs = options.killAfterMs ?? 20_000;
    this.proc = spawn(process.execPath, [...(options.nodeArgs ?? []), '--import', 'tsx', resolve(HERE, script)], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, TEST_LOG: 'silent', ...options.env },
    });
    this.exited = new Promise((done) => this.proc.once('exit', () => done()));
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      const at = this.waiters.findIndex((w) => line.startsWith(`${w.prefix} `));
      if (at >= 0) this.waiters.splice(at, 1)[0]!.resolve(line.slice(line.indexOf(' ') + 1));
    });
  }

  private readonly killAfterMs: number;

  /** Waits for the child's READY line (`ms`: how long it may take to get there). */
  async ready(ms = 60_000): Promise<Info> {
    this.info = JSON.parse(await this.next('READY', ms)) as Info;
    return this.info;
  }

  async stats(): Promise<Stats> {
    const line = this.next('STATS', 10_000);
    this.proc.stdin!.write('stats\n');
    return JSON.parse(await line) as Stats;
  }

  /** SIGTERM (a clean stop: temp dirs removed, --cpu-prof written), SIGKILL if that hangs. */
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), this.killAfterMs);
    await this.exited;
    clearTimeout(timer);
    this.proc.stdin!.destroy();
  }

  private next(prefix: string, ms: number): Promise<string> {
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name}: no ${prefix} line within ${ms} ms\n${this.stderr}`)), ms);
      const onExit = () => reject(new Error(`${this.name} exited (code ${this.proc.exitCode}) before ${prefix}\n${this.stderr}`));
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
}
