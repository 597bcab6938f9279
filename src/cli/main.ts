import { Command, CommanderError } from 'commander';
import { ConfigError, loadConfig } from '../config/load.ts';
import { StoreLockedError } from '../store/store.ts';
import { AppError } from '../util/errors.ts';
import { accountCommands } from './accounts.ts';
import { domainCommands } from './domains.ts';
import { initCommand } from './init.ts';
import { keyCommands } from './keys.ts';
import { queueCommands } from './queue.ts';
import { startCommand } from './start.ts';

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

/** Runs the `postilion` command; resolves to the exit code. */
export async function main(argv: string[], io: CliIo = stdio): Promise<number> {
  const program = new Command('postilion')
    .description('Postilion: self-hosted transactional mail server')
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

  try {
    await program.parseAsync(argv);
    return exitCode;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    if (err instanceof ConfigError || err instanceof StoreLockedError || err instanceof AppError) {
      io.err(`postilion: ${err.message}\n`);
      return 2;
    }
    io.err(`postilion: ${(err as Error).stack ?? String(err)}\n`);
    return 1;
  }
}
