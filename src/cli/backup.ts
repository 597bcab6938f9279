import { Command } from 'commander';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { BackupSummary } from '../backup/format.ts';
import { backupStream } from '../backup/producer.ts';
import { checkBackupTarget, writeBackup } from '../backup/writer.ts';
import { ControlClient, NoDaemonError } from '../control/client.ts';
import { controlSocketPath } from '../control/protocol.ts';
import { Store } from '../store/store.ts';
import { badRequest } from '../util/errors.ts';
import { systemClock } from '../util/time.ts';
import { configFrom } from './config-option.ts';
import type { CliIo } from './io.ts';

/**
 * `postilion backup <dir>`: a consistent copy of the store and every key file, taken from the
 * running daemon over its control socket (a LevelDB snapshot: the daemon goes on accepting and
 * delivering), or from the store itself when no daemon runs.
 */
export function backupCommand(program: Command, io: CliIo): Command {
  return new Command('backup')
    .description('copy the store and every key file (consistent, from the running daemon without stopping it) into a new or empty directory')
    .argument('<dir>', 'where to write the backup (new or empty)')
    .option('--json', "print the backup's summary as JSON")
    .action(async (dir: string, opts: { json?: boolean }) => {
      const config = configFrom(program);
      // Refused before the daemon is asked for anything.
      checkBackupTarget(dir);
      let summary: BackupSummary;
      let from: string;
      try {
        summary = await writeBackup(dir, await new ControlClient(controlSocketPath(config)).backup());
        from = 'the running daemon';
      } catch (err) {
        if (!(err instanceof NoDaemonError)) throw err;
        summary = await fromStoppedStore(config.data.dir, config.keys.dir, dir);
        from = 'the store (no daemon runs)';
      }
      if (opts.json) return io.out(`${JSON.stringify(summary, null, 2)}\n`);
      io.out(
        `backup of ${summary.created_at} from ${from} written to ${dir}\n` +
          `store: ${summary.records} records\n` +
          `key files: ${summary.files.length === 0 ? 'none' : summary.files.map((f) => f.path).join(', ')}\n`,
      );
    });
}

/** No daemon: the same stream from the store opened here (its lock keeps a daemon out meanwhile). */
async function fromStoppedStore(dataDir: string, keysDir: string, dir: string): Promise<BackupSummary> {
  if (!existsSync(join(resolve(dataDir), 'CURRENT'))) throw badRequest(`no daemon runs and data.dir ${resolve(dataDir)} holds no store: nothing to back up`);
  const store = await Store.open(resolve(dataDir));
  try {
    return await writeBackup(dir, backupStream(store, keysDir, systemClock));
  } finally {
    await store.close();
  }
}
