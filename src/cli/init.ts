import { Command } from 'commander';
import { bootstrap, bootstrapDefaults, formatBootstrap } from '../accounts/bootstrap.ts';
import { openCore } from '../daemon.ts';
import { configFrom, type CliIo } from './main.ts';

/** `postilion init`: creates the first account and an all-scopes key on an empty data dir. */
export function initCommand(program: Command, io: CliIo, setExit: (code: number) => void): Command {
  return new Command('init')
    .description('create the first account and an administrator API key (printed once)')
    .option('--name <name>', 'account name')
    .option('--website <url>', 'account website')
    .option('--owner-email <email>', 'email of the account owner')
    .action(async (opts: { name?: string; website?: string; ownerEmail?: string }) => {
      const config = configFrom(program);
      const core = await openCore(config);
      try {
        if (await core.accounts.hasAny()) {
          io.err('postilion: this data directory is already initialised; use `postilion accounts create` and `postilion keys create`\n');
          setExit(1);
          return;
        }
        const defaults = bootstrapDefaults(config.server.hostname);
        const result = await bootstrap(core.store, core.accounts, core.apiKeys, {
          name: opts.name ?? defaults.name,
          website: opts.website ?? defaults.website,
          ownerEmail: opts.ownerEmail ?? defaults.ownerEmail,
        });
        io.out(formatBootstrap(result));
      } finally {
        await core.store.close();
      }
    });
}
