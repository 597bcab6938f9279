import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { ConfigError, loadConfig } from '../config/load.ts';
import { StoreLockedError } from '../store/store.ts';
import { StorageStartError } from '../store/storage-guard.ts';
import { AppError } from '../util/errors.ts';
import { accountCommands } from './accounts.ts';
import { doctorCommand } from './doctor.ts';
import { sinkCommand } from './sink.ts';
import { domainCommands } from './domains.ts';
import { initCommand } from './init.ts';
import { keyCommands } from './keys.ts';
import { queueCommands } from './queue.ts';
import { ListenError, startCommand } from './start.ts';

export interface CliIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

const stdio: CliIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

/** Loads the configuration named by the global --config option (or the defaults). */
export function configFrom(program: Command) {
  return loadConfig({ path: program.opts<{ config?: string }>().config }).config;
}

/** The version in package.json, two levels up from src/cli/ and from dist/cli/ alike. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/** Runs the `postilion` command; resolves to the exit code. */
export async function main(argv: string[], io: CliIo = stdio): Promise<number> {
  const program = new Command('postilion')
    .description('Postilion: self-hosted transactional mail server')
    .version(packageVersion(), '-V, --version', 'print the version')
    .option('-c, --config <path>', 'configuration file (default: config/postilion.yaml when present)')
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err });
  let exitCode = 0;
  const setExit = (code: number) => (exitCode = code);

  program.addCommand(startCommand(program, io, setExit));
  program.addCommand(initCommand(program, io, setExit));
  program.addCommand(accountCommands(program, io));
  program.addCommand(keyCommands(program, io));
  program.addCommand(domainCommands(program, io));
  program.addCommand(queueCommands(program, io));
  program.addCommand(doctorCommand(program, io, setExit));
  program.addCommand(sinkCommand(io));

  // addCommand() passes neither setting on: a usage error in a subcommand would end the process
  // at once, with status 1 and past the mapping below.
  const inherit = (parent: Command) => {
    for (const command of parent.commands) {
      command.exitOverride().configureOutput({ writeOut: io.out, writeErr: io.err });
      inherit(command);
    }
  };
  inherit(program);

  try {
    await program.parseAsync(argv);
    return exitCode;
  } catch (err) {
    // Usage errors (an unknown command or option, a missing argument) are bad input: status 2, as
    // the README promises; --help and --version exit 0.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (err instanceof ConfigError || err instanceof StoreLockedError || err instanceof AppError || err instanceof ListenError || err instanceof StorageStartError) {
      io.err(`postilion: ${err.message}\n`);
      return 2;
    }
    io.err(`postilion: ${(err as Error).stack ?? String(err)}\n`);
    return 1;
  }
}
