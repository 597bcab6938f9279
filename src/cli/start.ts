import { createServer, type Server } from 'node:net';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { writeBootstrapFile } from '../accounts/bootstrap.ts';
import { ConfigError, loadConfig } from '../config/load.ts';
import type { Config } from '../config/schema.ts';
import { Daemon } from '../daemon.ts';
import { configuredListeners, type ListenerSpec } from '../doctor/listeners.ts';
import { createLogger, type Logger } from '../logging/logger.ts';
import type { CliIo } from './main.ts';

/** A listener that cannot be opened: one line and exit status 2, with nothing of the daemon left running. */
export class ListenError extends Error {
  override name = 'ListenError';
}

/**
 * `postilion start`: runs the daemon in the foreground until SIGTERM/SIGINT (graceful stop,
 * exit 0). SIGHUP re-reads the configuration and applies what can change live.
 */
export function startCommand(program: Command, io: CliIo, setExit: (code: number) => void): Command {
  return new Command('start').description('run the server in the foreground').action(async () => {
    const path = program.opts<{ config?: string }>().config;
    const loaded = loadConfig({ path });
    await probeListeners(loaded.config);
    const log = createLogger(loaded.config.log.level);
    log.info({ config: loaded.source ?? 'built-in defaults', thread_pool: process.env.UV_THREADPOOL_SIZE ?? 'default' }, 'starting');
    const announce = stdoutIsJournal() ? toFile(join(resolve(loaded.config.data.dir), 'bootstrap-key.txt'), log) : io.out;
    const daemon = await Daemon.start({ config: loaded.config, log, announce }).catch((err: unknown) => {
      // Lost a race for a port after the check: Daemon.start has stopped what it had started.
      throw listenFailure(err) ?? err;
    });

    await new Promise<void>((resolve) => {
      const stop = (signal: NodeJS.Signals) => {
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
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
      process.on('SIGHUP', reload);
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

/**
 * Binds every address the configuration listens on, all at once (two listeners on one address
 * clash here as they would in the daemon), then lets them go. It runs before the daemon opens the
 * store or starts anything, so a busy port stops the start with nothing to undo. Port 0 (any
 * free port) cannot be busy.
 */
async function probeListeners(config: Config): Promise<void> {
  const held: Server[] = [];
  try {
    for (const spec of configuredListeners(config)) {
      if (spec.port !== 0) held.push(await bind(spec));
    }
  } finally {
    await Promise.all(held.map((server) => new Promise((done) => server.close(done))));
  }
}

function bind(spec: ListenerSpec): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => reject(new ListenError(`cannot listen on ${hostPort(spec.host, spec.port)} (${spec.name}): ${reason(err, spec.port)}`)));
    server.listen({ host: spec.host, port: spec.port }, () => resolve(server));
  });
}

/** A listen error from the daemon's own listeners, as one line. */
function listenFailure(err: unknown): ListenError | null {
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e?.syscall !== 'listen' || e.address === undefined) return null;
  // A Unix socket (the control socket) has a path and no port.
  const at = e.port === undefined ? e.address : hostPort(e.address, e.port);
  return new ListenError(`cannot listen on ${at}: ${reason(e, e.port ?? 0)}`);
}

function reason(err: NodeJS.ErrnoException, port: number): string {
  switch (err.code) {
    case 'EADDRINUSE':
      return 'address already in use';
    case 'EACCES':
      return port < 1024 ? 'permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE, which the systemd unit grants)' : 'permission denied';
    case 'EADDRNOTAVAIL':
      return 'not an address of this machine';
    default:
      return err.code ?? err.message;
  }
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
