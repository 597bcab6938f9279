import { Command } from 'commander';
import { bootstrap, bootstrapDefaults, formatBootstrap } from '../accounts/bootstrap.ts';
import { ControlClient, NoDaemonError } from '../control/client.ts';
import { controlSocketPath } from '../control/protocol.ts';
import { openCore } from '../daemon.ts';
import { configFrom } from './config-option.ts';
import type { CliIo } from './main.ts';

const ALREADY = 'postilion: this data directory is already initialised; use `postilion accounts create` and `postilion keys create`\n';

/**
 * `postilion init`: creates the first account and an all-scopes key on an empty data dir. A
 * running daemon made them itself when it started (and printed the key), so with one running
 * there is nothing to do.
 */
export function initCommand(program: Command, io: CliIo, setExit: (code: number) => void): Command {
  return new Command('init')
    .description('create the first account and an administrator API key (printed once)')
    .option('--name <name>', 'account name (default: Postilion)')
    .option('--website <url>', 'account website (default: https://<server.hostname>)')
    .option('--owner-email <email>', 'email of the account owner (default: postmaster@<server.hostname>)')
    .option('--shell', 'print the account id and the key as shell assignments (export ACCOUNT=…, export KEY=…), for eval "$(postilion init --shell)"')
    .action(async (opts: { name?: string; website?: string; ownerEmail?: string; shell?: boolean }) => {
      const config = configFrom(program);
      try {
        const { accounts } = await new ControlClient(controlSocketPath(config)).listAccounts({});
        io.err(accounts.length > 0 ? ALREADY : 'postilion: the running daemon is creating the first account and its key itself: see its output\n');
        setExit(1);
        return;
      } catch (err) {
        if (!(err instanceof NoDaemonError)) throw err;
      }
      const core = await openCore(config);
      try {
        if (await core.accounts.hasAny()) {
          io.err(ALREADY);
          setExit(1);
          return;
        }
        const defaults = bootstrapDefaults(config.server.hostname);
        const result = await bootstrap(core.store, core.accounts, core.apiKeys, {
          name: opts.name ?? defaults.name,
          website: opts.website ?? defaults.website,
          ownerEmail: opts.ownerEmail ?? defaults.ownerEmail,
        });
        // Ids and keys are [0-9a-z-] only: nothing in them needs quoting.
        io.out(opts.shell ? `export ACCOUNT=${result.account.id}\nexport KEY=${result.secret}\n` : formatBootstrap(result));
      } finally {
        await core.store.close();
      }
    });
}
