import type { Command } from 'commander';
import type { CliIo } from './io.ts';

/** What a command's builder is given: the program (for --config), the output, the exit status. */
export interface CommandContext {
  program: Command;
  io: CliIo;
  setExit: (code: number) => void;
}

export interface CommandEntry {
  name: string;
  /** The line `postilion --help` shows; the command's own --help shows its full description. */
  summary: string;
  /** Imports the command's module and builds it: only the command being run is loaded. */
  load: (c: CommandContext) => Promise<Command>;
}

/**
 * Every `postilion` command, each with a lazy import: `--version`, `--help` and a control-socket
 * command load none of the others (`start` brings the whole daemon, which takes seconds to
 * import). To add a command, add its line here.
 */
export const COMMANDS: readonly CommandEntry[] = [
  { name: 'start', summary: 'run the server in the foreground', load: async (c) => (await import('./start.ts')).startCommand(c.program, c.io, c.setExit) },
  {
    name: 'init',
    summary: 'create the first account and an administrator API key (printed once)',
    load: async (c) => (await import('./init.ts')).initCommand(c.program, c.io, c.setExit),
  },
  { name: 'accounts', summary: 'manage accounts', load: async (c) => (await import('./accounts.ts')).accountCommands(c.program, c.io) },
  { name: 'keys', summary: 'manage API keys', load: async (c) => (await import('./keys.ts')).keyCommands(c.program, c.io) },
  { name: 'domains', summary: 'manage sending domains', load: async (c) => (await import('./domains.ts')).domainCommands(c.program, c.io, c.setExit) },
  {
    name: 'smtp-credentials',
    summary: 'SMTP credentials of an account: list, show, delete',
    load: async (c) => (await import('./smtp-credentials.ts')).smtpCredentialCommands(c.program, c.io),
  },
  {
    name: 'webhooks',
    summary: 'webhooks of an account: list, show, enable, disable, delete',
    load: async (c) => (await import('./webhooks.ts')).webhookCommands(c.program, c.io),
  },
  {
    name: 'routes',
    summary: 'inbound routes of an account: list, show, enable, disable, delete',
    load: async (c) => (await import('./routes.ts')).routeCommands(c.program, c.io),
  },
  {
    name: 'suppressions',
    summary: 'suppressed addresses of an account: list, show, delete',
    load: async (c) => (await import('./suppressions.ts')).suppressionCommands(c.program, c.io),
  },
  {
    name: 'messages',
    summary: 'where a message is: its events and delivery attempts in order',
    load: async (c) => (await import('./messages.ts')).messageCommands(c.program, c.io),
  },
  {
    name: 'queue',
    summary: 'what is queued and why it waits; retry, purge, suspend, resume',
    load: async (c) => (await import('./queue.ts')).queueCommands(c.program, c.io),
  },
  {
    name: 'backup',
    summary: 'copy the store and every key file into a directory, from a running daemon too',
    load: async (c) => (await import('./backup.ts')).backupCommand(c.program, c.io),
  },
  {
    name: 'restore',
    summary: 'put a backup into an empty data directory (the daemon stopped)',
    load: async (c) => (await import('./restore.ts')).restoreCommand(c.program, c.io),
  },
  {
    name: 'doctor',
    summary: 'check the configuration, listeners, certificates, DNS and DKIM',
    load: async (c) => (await import('./doctor.ts')).doctorCommand(c.program, c.io, c.setExit),
  },
  {
    name: 'cluster',
    summary: 'several nodes on one PostgreSQL: set up its database, see its nodes and leader',
    load: async (c) => (await import('./cluster.ts')).clusterCommands(c.program, c.io),
  },
  {
    name: 'ui',
    summary: "the web dashboard: the operator's one-time sign-in link, ending every session",
    load: async (c) => (await import('./ui.ts')).uiCommands(c.program, c.io),
  },
  { name: 'sink', summary: 'run a local SMTP sink that writes every message to a directory', load: async (c) => (await import('./sink.ts')).sinkCommand(c.io) },
];

/** Global options that take a value: the word after them is not a command name. */
const VALUE_OPTIONS = new Set(['-c', '--config']);

/**
 * The command `argv` (without node and the script) names, as commander will read it: the first
 * word that is not a global option or its value. `help <command>` names that command.
 */
export function commandNamed(args: readonly string[]): string | undefined {
  const words: string[] = [];
  for (let i = 0; i < args.length && words.length < 2; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      words.push(...args.slice(i + 1, i + 3));
      break;
    }
    if (VALUE_OPTIONS.has(arg)) i++;
    else if (!arg.startsWith('-')) words.push(arg);
    else if (words.length > 0) break;
  }
  return words[0] === 'help' ? words[1] : words[0];
}
