import { Command } from 'commander';
import { restoreBackup } from '../backup/restore.ts';
import { ControlClient } from '../control/client.ts';
import { controlSocketPath } from '../control/protocol.ts';
import { configFrom } from './config-option.ts';
import type { CliIo } from './io.ts';

/**
 * `postilion restore <dir>`: a backup (`postilion backup`) put back into the configured data
 * and keys directories, with the daemon stopped and the data directory empty.
 */
export function restoreCommand(program: Command, io: CliIo): Command {
  return new Command('restore')
    .description('put a backup into data.dir and keys.dir (the daemon stopped, data.dir empty or absent, no key file overwritten)')
    .argument('<dir>', 'a directory written by postilion backup')
    .action(async (dir: string) => {
      const config = configFrom(program);
      const client = new ControlClient(controlSocketPath(config));
      const { summary, dataDir, keysDir } = await restoreBackup(dir, {
        dataDir: config.data.dir,
        keysDir: config.keys.dir,
        daemonRuns: () => client.answers(),
      });
      io.out(
        `restored the backup of ${summary.created_at}: ${summary.records} records into ${dataDir}, ` +
          `${summary.files.length} key files into ${keysDir}; start the daemon (postilion start)\n`,
      );
    });
}
