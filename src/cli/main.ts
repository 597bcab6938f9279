import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { COMMANDS, commandNamed } from './commands.ts';
import type { CliIo } from './io.ts';

const stdio: CliIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

/**
 * Errors that are the operator's to act on: one line, status 2. Known by name, not class: their
 * modules (the configuration, the store, the listeners) are loaded only by the commands that
 * need them, and importing them here would load them for every command.
 */
const OPERATOR_ERRORS = new Set(['ConfigError', 'StoreLockedError', 'ListenError', 'SinkListenError', 'StorageStartError', 'ClusterError']);

/**
 * An error for the operator: one of those, or an AppError (bad input, not found: it has the
 * status an API client would get). Recognised by its status rather than its class, which a
 * command's module may have from another copy of util/errors.ts (tests load this file as
 * CommonJS, the commands it imports as ES modules).
 */
function forOperator(err: unknown): err is Error {
  return err instanceof Error && (OPERATOR_ERRORS.has(err.name) || typeof (err as { status?: unknown }).status === 'number');
}

/** The version in package.json, two levels up from src/cli/ and from dist/cli/ alike. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/** A commander message ("error: unknown option '--x'\n(Did you mean --y?)") as one `postilion: …` line. */
export function usageLine(text: string): string {
  return `postilion: ${text
    .replace(/^error:\s*/, '')
    .replace(/\s*\n\s*/g, ' ')
    .trim()}\n`;
}

/** Runs the `postilion` command; resolves to the exit code. */
export async function main(argv: string[], io: CliIo = stdio): Promise<number> {
  const program = new Command('postilion')
    .description('Postilion: self-hosted transactional mail server')
    .version(packageVersion(), '-V, --version', 'print the version')
    .option('-c, --config <path>', 'configuration file (default: config/postilion.yaml when present)');
  let exitCode = 0;
  const context = { program, io, setExit: (code: number) => (exitCode = code) };

  try {
    // Only the command named is imported and built; the others are listed by name for --help.
    const named = commandNamed(argv.slice(2));
    for (const entry of COMMANDS) {
      const command = entry.name === named ? await entry.load(context) : new Command(entry.name).description(entry.summary);
      program.addCommand(command.summary(entry.summary));
    }
    // Usage errors (an unknown command or option, a missing argument) as one line, and no exit
    // from inside commander: addCommand() passes neither setting on, so each command gets them.
    const configure = (command: Command) => {
      command.exitOverride().configureOutput({ writeOut: io.out, writeErr: io.err, outputError: (text, write) => write(usageLine(text)) });
      command.commands.forEach(configure);
    };
    configure(program);
    await program.parseAsync(argv);
    return exitCode;
  } catch (err) {
    // Usage errors are bad input: status 2, as the README promises; --help and --version exit 0.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (forOperator(err)) {
      io.err(`postilion: ${err.message}\n`);
      return 2;
    }
    io.err(`postilion: ${(err as Error).stack ?? String(err)}\n`);
    return 1;
  }
}
