import { Command } from 'commander';
import { ControlClient, NoDaemonError } from '../control/client.ts';
import { controlSocketPath } from '../control/protocol.ts';
import { AppError, badRequest, conflict } from '../util/errors.ts';
import { controlSocketFrom } from './control-socket.ts';
import type { CliIo } from './io.ts';
import { json } from './print.ts';

/**
 * `postilion ui …`: the dashboard's operator sign-in. Both go to the running daemon over its
 * control socket (the sessions are the daemon's); with no daemon there is nothing to sign in to.
 */
export function uiCommands(program: Command, io: CliIo): Command {
  const ui = new Command('ui').description("the web dashboard: the operator's one-time sign-in link, ending every session");
  ui.command('login')
    .description(
      'print a one-time link that signs the operator in to the dashboard (the link is a secret: it is printed once, and works once, until it expires)',
    )
    .option('--json', 'print JSON: {url, expires_at}')
    .action(async (opts: { json?: boolean }) => {
      const link = await onDaemon(program, (client) => client.uiLogin());
      io.out(opts.json ? json(link) : `${link.url}\n`);
      if (!opts.json) io.err(`postilion: the link works once and expires at ${link.expires_at}; it signs in as the operator: do not share it\n`);
    });
  ui.command('logout')
    .description('end dashboard sessions')
    .option('--all', 'end every session: every browser signed in (accounts and operator) must sign in again')
    .option('--json', 'print JSON: {revoked}')
    .action(async (opts: { all?: boolean; json?: boolean }) => {
      if (!opts.all) throw badRequest('ui logout: add --all (every session ends; a browser signs itself out with its Sign out button)');
      const result = await onDaemon(program, (client) => client.uiLogoutAll());
      io.out(opts.json ? json(result) : `dashboard sessions ended: ${result.revoked}\n`);
    });
  return ui;
}

/** One request to the running daemon; none running is the operator's to fix (exit 2). */
async function onDaemon<T>(program: Command, op: (client: ControlClient) => Promise<T>): Promise<T> {
  // The configuration is validated (its schema loaded) only when data.dir alone does not say where the socket is.
  const client = new ControlClient(controlSocketFrom(program) ?? controlSocketPath((await import('./config-option.ts')).configFrom(program)));
  try {
    return await op(client);
  } catch (err) {
    if (err instanceof NoDaemonError) throw conflict('no daemon runs: the dashboard is served by the running daemon (start it first)');
    if (err instanceof AppError && err.status === 404)
      throw new AppError(404, 'the running daemon serves no dashboard (an older release, or dashboard.enabled is false)');
    throw err;
  }
}
