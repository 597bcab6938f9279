/**
 * The protocol between a benchmark server child and test/bench/api-accept.ts: the child prints
 * one `READY <json>` line once it listens, answers each `stats` line on stdin with a
 * `STATS <json>` line, and shuts down cleanly (so that `--cpu-prof` is written) on SIGTERM,
 * SIGINT or when its stdin closes — the last means it never outlives a parent that died.
 */
import { createInterface } from 'node:readline';

export function serveUntilDone(info: Record<string, unknown>, stats: () => unknown, stop: () => Promise<void>): void {
  let stopping = false;
  const finish = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    try {
      await stop();
    } catch (err) {
      process.stderr.write(`stop failed: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    }
    process.exit();
  };
  process.on('SIGTERM', () => void finish());
  process.on('SIGINT', () => void finish());
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.trim() === 'stats') process.stdout.write(`STATS ${JSON.stringify(stats())}\n`);
  });
  lines.on('close', () => void finish());
  process.stdout.write(`READY ${JSON.stringify(info)}\n`);
}
