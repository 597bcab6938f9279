import { Command } from 'commander';
import { ConfigError, loadConfig } from '../config/load.ts';
import { Daemon } from '../daemon.ts';
import { createLogger } from '../logging/logger.ts';
import type { CliIo } from './main.ts';

/**
 * `postilion start`: runs the daemon in the foreground until SIGTERM/SIGINT (graceful stop,
 * exit 0). SIGHUP re-reads the configuration and applies what can change live.
 */
export function startCommand(program: Command, io: CliIo, setExit: (code: number) => void): Command {
  return new Command('start').description('run the server in the foreground').action(async () => {
    const path = program.opts<{ config?: string }>().config;
    const loaded = loadConfig({ path });
    const log = createLogger(loaded.config.log.level);
    log.info({ config: loaded.source ?? 'built-in defaults', thread_pool: process.env.UV_THREADPOOL_SIZE ?? 'default' }, 'starting');
    const daemon = await Daemon.start({ config: loaded.config, log, announce: io.out });

    await new Promise<void>((resolve) => {
      const stop = (signal: NodeJS.Signals) => {
        log.info({ signal }, 'signal received');
        process.removeListener('SIGHUP', reload);
        daemon.stop().then(
          () => {
            setExit(0);
            resolve();
          },
          (err: unknown) => {
            log.error({ err }, 'stop failed');
            setExit(1);
            resolve();
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
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
      process.on('SIGHUP', reload);
    });
    log.flush();
  });
}
