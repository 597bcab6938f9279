import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const CLI = resolve(dirname(fileURLToPath(import.meta.url)), '../../src/cli/postilion.js');

/** A `postilion` child process whose output is collected and can be waited on. */
export class Child {
  stdout = '';
  stderr = '';
  readonly exited: Promise<number | null>;
  private readonly proc: ChildProcess;

  constructor(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) {
    this.proc = spawn(process.execPath, [CLI, ...args], {
      cwd,
      // The metrics and tracking listeners on free ports unless a test says otherwise: daemons run side by side.
      env: { PATH: process.env.PATH, HOME: process.env.HOME, POSTILION_METRICS__PORT: '0', POSTILION_TRACKING__PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc.stdout!.on('data', (d: Buffer) => (this.stdout += d.toString()));
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) => this.proc.on('exit', (code) => resolve(code)));
  }

  /** Resolves with the first match of `pattern` in stdout, or rejects after `ms`. */
  async waitFor(pattern: RegExp, ms = 15_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + ms;
    for (;;) {
      const match = this.stdout.match(pattern);
      if (match) return match;
      if (this.proc.exitCode !== null) throw new Error(`process exited (${this.proc.exitCode}) before ${pattern}:\n${this.stdout}\n${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${pattern}:\n${this.stdout}\n${this.stderr}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** The process id (to read its /proc figures). */
  get pid(): number {
    return this.proc.pid!;
  }

  signal(sig: NodeJS.Signals): void {
    this.proc.kill(sig);
  }

  /** Ends the process for good (test cleanup). */
  async kill(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGKILL');
      await this.exited;
    }
  }
}

/** Runs a `postilion` command to completion. */
export async function run(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = new Child(args, cwd, env);
  const code = await child.exited;
  return { code, stdout: child.stdout, stderr: child.stderr };
}

/** `postilion --config <config> …` run in `dir`, expected to exit 0: its stdout. */
export function checkedCli(config: string, dir: string): (...args: string[]) => Promise<string> {
  return async (...args) => {
    const res = await run(['--config', config, ...args], dir);
    if (res.code !== 0) throw new Error(`postilion ${args.join(' ')} exited ${res.code}: ${res.stderr}`);
    return res.stdout;
  };
}

/** What `postilion init` printed: the first account's id and its administrator key. */
export function initialised(stdout: string): { accountId: string; key: string } {
  return { accountId: /account id: ([0-9a-f-]{36})/.exec(stdout)![1]!, key: /aha-sk-[A-Za-z0-9]{64}/.exec(stdout)![0] };
}
