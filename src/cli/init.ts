import { Command } from 'commander';
import { bootstrap, bootstrapDefaults, formatBootstrap } from '../accounts/bootstrap.ts';
import { ConfigError } from '../config/load.ts';
import { ControlClient, NoDaemonError } from '../control/client.ts';
import { controlSocketPath } from '../control/protocol.ts';
import { openCore } from '../assemblies/core.ts';
import { StoreLockedError } from '../store/store.ts';
import { AppError } from '../util/errors.ts';
import { configFrom } from './config-option.ts';
import type { CliIo } from './io.ts';

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
      if (!opts.shell) return init(program, opts, io, setExit);
      // Under eval "$(postilion init --shell)" only stdout is run: a failure must be a statement
      // there that fails, or eval returns 0 and the shell goes on with ACCOUNT and KEY unset.
      // Its message is written once, by that statement, not also on stderr.
      let failure = '';
      let code = 0;
      const shellIo: CliIo = { out: io.out, err: (text) => (failure += text) };
      try {
        await init(program, opts, shellIo, (c) => (code = c));
      } catch (err) {
        const expected = err instanceof ConfigError || err instanceof StoreLockedError || err instanceof AppError;
        failure += `postilion: ${(err as Error).message ?? String(err)}\n`;
        code = expected ? 2 : 1;
      }
      if (code !== 0) {
        io.out(failingStatement(failure, code));
        setExit(code);
      }
    });
}

/**
 * Shell that writes `message` to stderr and ends with status `code`, for eval: `echo '…' >&2;
 * (exit 2)`. Inside single quotes nothing is special but the quote itself, written '\''.
 */
export function failingStatement(message: string, code: number): string {
  const lines = message
    .trimEnd()
    .split('\n')
    .filter((l) => l !== '');
  const echo = lines.map((l) => `echo '${l.replace(/'/g, `'\\''`)}' >&2`).join('; ');
  return `${echo}${echo ? '; ' : ''}(exit ${code})\n`;
}

/** Creates the first account and its key, unless the data directory (or a running daemon) has one. */
async function init(
  program: Command,
  opts: { name?: string; website?: string; ownerEmail?: string; shell?: boolean },
  io: CliIo,
  setExit: (code: number) => void,
): Promise<void> {
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
}
