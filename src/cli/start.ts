import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { writeBootstrapFile } from '../accounts/bootstrap.ts';
import { ConfigError, loadConfig } from '../config/load.ts';
import { bindListeners } from '../bind-phase.ts';
import { storageSettings } from '../assemblies/core.ts';
import { Daemon } from '../daemon.ts';
import { assertRoomToStart } from '../store/storage-guard.ts';
import { createLogger, type Logger } from '../logging/logger.ts';
import type { CliIo } from './io.ts';

export { ListenError } from '../bind-phase.ts';

/**
 * `postilion start`: runs the daemon in the foreground until SIGTERM/SIGINT (graceful stop,
 * exit 0). SIGHUP re-reads the configuration and applies what can change live.
 */
export function startCommand(program: Command, io: CliIo, setExit: (code: number) => void): Command {
  return new Command('start').description('run the server in the foreground').action(async () => {
    const path = program.opts<{ config?: string }>().config;
    const loaded = loadConfig({ path });
    // A filesystem short of room refuses the start before anything is bound or made (statfs only).
    assertRoomToStart(loaded.config.data.dir, storageSettings(loaded.config));
    // Every listener is bound first: a busy one stops the start (one line, exit 2) before the
    // first log line, with no store opened and no file made.
    const bound = await bindListeners(loaded.config);
    // One listener per signal for the whole life of the process, installed before the first log
    // line. A SIGTERM or SIGINT while the daemon starts is kept and acted on once it is up (Node's
    // default would end it half-started). Never removed and added again: with no listener Node
    // restores the default action, and a signal libuv caught but had not yet dispatched is lost.
    let onSignal: (signal: NodeJS.Signals) => void = (signal) => (early ??= signal);
    let early: NodeJS.Signals | null = null;
    const dispatch = (signal: NodeJS.Signals) => onSignal(signal);
    process.on('SIGTERM', dispatch);
    process.on('SIGINT', dispatch);
    const log = createLogger(loaded.config.log.level);
    log.info({ config: loaded.source ?? 'built-in defaults', thread_pool: process.env.UV_THREADPOOL_SIZE ?? 'default' }, 'starting');
    const announce = stdoutIsJournal() ? toFile(join(resolve(loaded.config.data.dir), 'bootstrap-key.txt'), log) : io.out;
    const daemon = await Daemon.start({ config: loaded.config, log, announce, bound });

    await new Promise<void>((resolve) => {
      const stop = (signal: NodeJS.Signals) => {
        // A second signal while the stop is under way ends the process at once, as Node's default did.
        onSignal = (again) => {
          log.warn({ signal: again }, 'second signal: exiting without waiting for the stop');
          log.flush();
          process.exit(1);
        };
        log.info({ signal }, 'signal received');
        process.removeListener('SIGHUP', reload);
        const exitSoon = (code: number) => {
          setExit(code);
          // Stopped: whatever is still open (a thread, a socket of a failing step) does not keep the process.
          setTimeout(() => process.exit(code), 2000).unref();
          resolve();
        };
        daemon.stop().then(
          () => exitSoon(0),
          (err: unknown) => {
            log.error({ err }, 'stop failed');
            exitSoon(1);
          },
        );
      };
      const reload = () => {
        try {
          daemon.reload(loadConfig({ path: loaded.source ?? path }).config);
        } catch (err) {
          // A bad file must not take a running server down: keep the old configuration.
          log.error({ err: err instanceof ConfigError ? err.message : err }, 'reload failed, configuration unchanged');
        }
      };
      onSignal = stop;
      process.on('SIGHUP', reload);
      if (early) stop(early);
    });
    log.flush();
  });
}

/**
 * Under systemd (it sets INVOCATION_ID for every service, JOURNAL_STREAM when stdout is the
 * journal) and not on a terminal, stdout is the journal: whoever may read the journal would read
 * the bootstrap key there.
 */
function stdoutIsJournal(): boolean {
  return !process.stdout.isTTY && Boolean(process.env.INVOCATION_ID || process.env.JOURNAL_STREAM);
}

/** Announces the bootstrap key in a file only the daemon's user can read; the log gets its path. */
function toFile(file: string, log: Logger): (text: string) => void {
  return (text) => {
    try {
      writeBootstrapFile(file, text);
      log.warn({ file }, 'bootstrap API key written to this file (mode 0600): store the key elsewhere, then delete the file');
    } catch (err) {
      // The account and its key exist now; only the secret is lost, and it is never shown again.
      log.error({ file, err: (err as Error).message }, 'could not write the bootstrap API key: create a key with `postilion keys create`');
    }
  };
}
