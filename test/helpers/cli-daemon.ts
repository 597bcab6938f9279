import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Child, run } from './child.ts';

/** A `postilion start` child process on a temp directory, with what its first start printed. */
export interface CliDaemon {
  dir: string;
  config: string;
  child: Child;
  apiUrl: string;
  account: string;
  key: string;
  /** `postilion --config <config> …` run to completion. */
  cli(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Kills the daemon and removes the directory. */
  stop(): Promise<void>;
}

/**
 * Starts the daemon as the operator runs it, on loopback ports chosen by the kernel, and waits
 * for its control socket. `extra` is appended to the YAML configuration (top-level sections).
 */
export async function startCliDaemon(prefix: string, extra = ''): Promise<CliDaemon> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const config = join(dir, 'postilion.yaml');
  writeFileSync(
    config,
    `data:\n  dir: ${join(dir, 'data')}\nkeys:\n  dir: ${join(dir, 'keys')}\napi:\n  port: 0\nshutdown:\n  grace_seconds: 5\n` +
      `smtp:\n  submission:\n    starttls_port: 0\n    tls_port: 0\n  inbound:\n    port: 0\n${extra}`,
  );
  const child = new Child(['--config', config, 'start'], dir);
  try {
    await child.waitFor(/control socket listening/, 30_000);
    const apiUrl = (await child.waitFor(/"urls":\["(http:\/\/127\.0\.0\.1:\d+)"/))[1]!;
    const key = (await child.waitFor(/aha-sk-[A-Za-z0-9]{64}/))[0];
    const account = (await child.waitFor(/account id: ([0-9a-f-]{36})/))[1]!;
    return {
      dir,
      config,
      child,
      apiUrl,
      account,
      key,
      cli: (...args) => run(['--config', config, ...args], dir),
      stop: async () => {
        await child.kill();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await child.kill();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
