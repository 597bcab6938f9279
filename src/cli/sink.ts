import { createWriteStream, mkdirSync } from 'node:fs';
import { once } from 'node:events';
import { join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Command, InvalidArgumentError } from 'commander';
import { SMTPServer } from 'smtp-server';
import type { CliIo } from './io.ts';

/** The sink's address cannot be listened on: one line naming it, exit status 2 (see main.ts). */
export class SinkListenError extends Error {
  override name = 'SinkListenError';
}

export interface CaptureSinkOptions {
  host: string;
  port: number;
  dir: string;
  maxBytes?: number;
  /** Told of each message written. */
  onMessage?: (file: string, from: string, to: string[]) => void;
}

export interface CaptureSink {
  port: number;
  close(): Promise<void>;
}

/**
 * A local SMTP server that accepts every message and writes it, as received, to `<dir>/*.eml`:
 * the smarthost of a laptop set-up, so that mail Postilion delivers (DKIM-signed, with its VERP
 * return path) can be read without sending it anywhere. Not for production: no TLS, no AUTH, no
 * relay; it listens on loopback unless told otherwise.
 */
export async function startCaptureSink(options: CaptureSinkOptions): Promise<CaptureSink> {
  mkdirSync(options.dir, { recursive: true });
  let n = 0;
  const server = new SMTPServer({
    name: 'postilion-sink',
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    size: options.maxBytes ?? 50 * 1024 * 1024,
    // smtp-server otherwise accepts an oversized message and only flags it.
    ...({ rejectOversized: true } as object),
    logger: false,
    // A stop does not wait for clients that keep their connection open (a daemon's parked session).
    closeTimeout: 1000,
    onData(stream, session, callback) {
      const stamp = new Date().toISOString().replace(/[:.]/g, '-');
      const file = join(options.dir, `${stamp}-${process.pid}-${++n}.eml`);
      const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
      const to = session.envelope.rcptTo.map((r) => r.address);
      // Who it was for, as a header of our own on top (the message itself is kept byte for byte).
      const out = createWriteStream(file, { flags: 'wx', mode: 0o600 });
      out.write(`X-Postilion-Sink: from=<${from}> to=<${to.join('>,<')}>\r\n`);
      pipeline(stream, out).then(
        () => {
          if ((stream as { sizeExceeded?: boolean }).sizeExceeded) return callback(Object.assign(new Error('message too large'), { responseCode: 552 }));
          options.onMessage?.(file, from, to);
          callback(null, `Ok: captured as ${file}`);
        },
        (err: Error) => callback(Object.assign(new Error(`cannot write the message: ${err.message}`), { responseCode: 451 })),
      );
    },
  });
  server.listen(options.port, options.host);
  // once() rejects with an 'error' the emitter gives while it waits: either way, one error.
  await Promise.race([once(server.server, 'listening'), once(server, 'error').then(([err]) => Promise.reject(err as Error))]).catch(
    (err: NodeJS.ErrnoException) => {
      throw listenError(err, options);
    },
  );
  const address = server.server.address();
  return {
    port: typeof address === 'object' && address ? address.port : options.port,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}

/** "listen EADDRINUSE: address already in use 127.0.0.1:2526" as "cannot listen on 127.0.0.1:2526 (sink): address already in use". */
function listenError(err: NodeJS.ErrnoException, { host, port }: { host: string; port: number }): Error {
  if (err.syscall !== 'listen') return err;
  const at = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  const why = err.message.replace(/^listen \w+: /, '').replace(/ \S+:\d+$/, '');
  return new SinkListenError(`cannot listen on ${at} (sink): ${why}`);
}

function portOption(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError('a port is a whole number from 0 to 65535');
  return port;
}

/** `postilion sink`: the capture sink in the foreground, until SIGINT or SIGTERM. */
export function sinkCommand(io: CliIo): Command {
  return new Command('sink')
    .description('Runs a local SMTP sink that writes every message it receives to a directory (for trying Postilion without sending mail anywhere)')
    .option('--host <address>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on', portOption, 2526)
    .option('--dir <path>', 'directory the .eml files are written to', './outbox')
    .action(async (opts: { host: string; port: number; dir: string }) => {
      const dir = resolve(opts.dir);
      const sink = await startCaptureSink({
        host: opts.host,
        port: opts.port,
        dir,
        onMessage: (file, from, to) => io.out(`captured ${file} (from <${from}> to ${to.map((a) => `<${a}>`).join(', ')})\n`),
      });
      io.out(`postilion sink: listening on ${opts.host}:${sink.port}, writing messages to ${dir}\n`);
      await new Promise<void>((done) => {
        const stop = () => {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
          done();
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
      });
      await sink.close();
    });
}
