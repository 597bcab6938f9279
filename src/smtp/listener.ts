import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type {
  SMTPServer,
  SMTPServerAddress,
  SMTPServerAuthentication,
  SMTPServerAuthenticationResponse,
  SMTPServerOptions,
  SMTPServerSession,
} from 'smtp-server';
import { receiveData, type DataSpool, type SpooledMessage } from '../message/spool.ts';
import type { BoundSocket } from '../util/bound-socket.ts';
import { AppError } from '../util/errors.ts';
import { checkLines } from './line-check.ts';
import { isClientGone, logSessionErrors, type Deadlines } from './listener-server.ts';
import { PerAddressLimit, reply } from './session-limits.ts';
import { INSUFFICIENT_STORAGE, isStorageFailure, sharedStoreRefusal, storageRefusal, type StorageState } from './storage-reply.ts';

/** What both listeners (submission, inbound MX) take from the configuration. */
export interface ListenerOptions {
  host: string;
  hostname: string;
  tls: { cert: Buffer; key: Buffer };
  maxMessageBytes: number;
  maxRecipients: number;
  /** Sessions one client address may hold at once per listener; more are refused with 421. */
  maxConnectionsPerAddress: number;
  /** On close, how long sessions may take to finish before they are cut. */
  graceMs: number;
  /** Per command line and per DATA (smtp.command_deadline_seconds, smtp.data_deadline_seconds). */
  deadlines: Deadlines;
}

/** A command's outcome by its reply: accepted (2xx/3xx), deferred (4xx), rejected (5xx). */
export type Verdict = 'accepted' | 'deferred' | 'rejected';

/** Told of each ended session and each decided command (metrics); must not throw. */
export interface ListenerObserver {
  /** `result`: `message` when the session had a message accepted, `none` otherwise. */
  session(listener: string, result: 'message' | 'none'): void;
  command(listener: string, command: 'CONNECT' | 'AUTH' | 'MAIL' | 'RCPT' | 'DATA', result: Verdict): void;
}

export interface ListenerDeps {
  log: Logger;
  observer?: ListenerObserver;
  /** The storage guard: new mail is refused with 452 4.3.1 while the store cannot take writes. */
  storage?: StorageState;
}

/** What the shared handlers keep of a session; each listener's own state extends it. */
export interface ListenerSession {
  /** Whether the session was counted against its address (refused connections are not). */
  counted?: boolean;
  /** Whether a message of this session was accepted. */
  delivered?: boolean;
  /** The spool of a DATA under way: discarded when the session ends before it is settled. */
  spool?: DataSpool;
}

/** Gives a command its reply: none (accepted) or an error made by `reply`. */
export type Answer = (err?: Error | null) => void;

/**
 * What one listener adds to the session handling both share (per-address limit, storage guard,
 * DATA received through a spool with its line checks, the replies to failures, metrics).
 */
export interface ListenerRole<S extends ListenerSession> {
  /** The listener's name in metrics. */
  name: string;
  /** Its log lines, as each listener has always written them. */
  lines: { tooManyConnections: string; spoolNotDeleted: string; dataIncomplete: string; dataNotStored: string };
  newSession(): S;
  /**
   * Its smtp-server, given the options both share: adds its own (banner, AUTH). smtp-server
   * writes "<name> ESMTP <banner>": the banner must not say ESMTP again.
   */
  server(shared: SMTPServerOptions): SMTPServer;
  auth?(auth: SMTPServerAuthentication, session: SMTPServerSession, answer: (err?: Error | null, response?: SMTPServerAuthenticationResponse) => void): void;
  /** MAIL FROM, once the storage guard let it through. */
  mailFrom(address: SMTPServerAddress, session: SMTPServerSession, state: S, answer: Answer): void;
  rcptTo(address: SMTPServerAddress, session: SMTPServerSession, state: S, answer: Answer): void;
  /** A spool for one message's DATA (written to the store as it arrives past 1 MiB). */
  newSpool(): DataSpool;
  /** Fields of its log lines about a DATA. */
  transaction(session: SMTPServerSession, state: S): Record<string, unknown>;
  /** A message refused whole before it is stored: too big (552) or with a bad line (554). */
  refused?(session: SMTPServerSession, state: S, reason: string, code: 552 | 554): void;
  /**
   * Stores a received message: the text of its 250, or the refusal to answer with. What it
   * throws is answered here (a client error 552; the store refusing writes 452; the cluster database away 451 4.3.0; else 451).
   */
  store(data: Buffer | SpooledMessage, session: SMTPServerSession, state: S, spool: DataSpool): Promise<string | Error>;
  /** Told how each DATA ended, after the command is counted. */
  settled?(result: Verdict): void;
}

/** Sessions per listener at most. */
const MAX_CLIENTS = 1000;

/** The reply past a message's recipient limit. */
export function tooManyRecipients(max: number): Error {
  return reply(452, `4.5.3 Too many recipients: at most ${max} per message`);
}

/** One listener's smtp-server: the session handling both listeners share, with what `role` adds. */
export function listenerServer<S extends ListenerSession>(options: ListenerOptions, deps: ListenerDeps, role: ListenerRole<S>): SMTPServer {
  const { log, observer } = deps;
  /** Counts a command's outcome by the reply its callback gets, then gives the reply. */
  const decided =
    <A extends unknown[]>(command: Parameters<ListenerObserver['command']>[1], callback: (err?: Error | null, ...rest: A) => void) =>
    (err?: Error | null, ...rest: A) => {
      const code = (err as { responseCode?: number } | null | undefined)?.responseCode;
      const verdict = !err ? 'accepted' : code !== undefined && code < 500 ? 'deferred' : 'rejected';
      observer?.command(role.name, command, verdict);
      if (command === 'DATA') role.settled?.(verdict);
      callback(err, ...rest);
    };
  const stateOf = (session: SMTPServerSession): S => {
    const holder = session as SMTPServerSession & { postilion?: S };
    holder.postilion ??= role.newSession();
    return holder.postilion;
  };
  /** Open sessions per client address: one address must not hold every slot of the listener. */
  const perAddress = new PerAddressLimit(options.maxConnectionsPerAddress);
  const shared: SMTPServerOptions = {
    key: options.tls.key,
    cert: options.tls.cert,
    name: options.hostname,
    size: options.maxMessageBytes,
    disableReverseLookup: true,
    hideDSN: true,
    hideREQUIRETLS: true,
    logger: false,
    // On close, sessions get the grace period (0 would mean smtp-server's default of 30 s).
    closeTimeout: Math.max(1, options.graceMs),
    maxClients: MAX_CLIENTS,

    onConnect(session, done) {
      const callback = decided('CONNECT', done);
      const address = session.remoteAddress;
      if (!perAddress.take(address)) {
        log.info({ client: address, open: perAddress.count(address) }, role.lines.tooManyConnections);
        return callback(reply(421, `4.7.0 Too many connections from ${address}; try again later`));
      }
      stateOf(session).counted = true;
      callback();
    },

    onClose(session) {
      const state = stateOf(session);
      if (state.spool?.unsettled) void state.spool.discard().catch((err: unknown) => log.error({ err }, role.lines.spoolNotDeleted));
      if (!state.counted) return;
      perAddress.release(session.remoteAddress);
      observer?.session(role.name, state.delivered ? 'message' : 'none');
    },

    onMailFrom(address, session, done) {
      const callback = decided('MAIL', done);
      const full = storageRefusal(deps.storage);
      if (full) return callback(full);
      role.mailFrom(address, session, stateOf(session), callback);
    },

    onRcptTo(address, session, done) {
      role.rcptTo(address, session, stateOf(session), decided('RCPT', done));
    },

    onData(stream, session, done) {
      const callback = decided('DATA', done);
      const state = stateOf(session);
      const spool = role.newSpool();
      state.spool = spool;
      const lines = checkLines(stream);
      receiveData(lines, options.maxMessageBytes, spool)
        .then(async (data) => {
          if (data === null) {
            await spool.discard();
            role.refused?.(session, state, 'too big', 552);
            return callback(reply(552, `5.3.4 Message too big: at most ${options.maxMessageBytes} bytes`));
          }
          if (lines.problem !== null) {
            await spool.discard();
            role.refused?.(session, state, lines.problem, 554);
            return callback(reply(554, `5.6.0 ${lines.problem}`));
          }
          const stored = await role.store(data, session, state, spool);
          if (stored instanceof Error) return callback(stored);
          state.delivered = true;
          callback(null, stored);
        })
        .catch((err: unknown) => {
          void spool.discard().catch(() => undefined);
          if (err instanceof AppError && err.status < 500) return callback(reply(552, `5.3.4 ${err.message}`));
          // The client left or was cut at the DATA deadline: its message was never complete, nothing of ours failed.
          if (isClientGone(err)) {
            log.info({ ...role.transaction(session, state), code: (err as { code?: string }).code }, role.lines.dataIncomplete);
            return callback(reply(451, '4.4.2 The message was not received in full'));
          }
          const away = sharedStoreRefusal(err);
          if (away) {
            log.warn({ ...role.transaction(session, state), reason: (err as Error).message }, role.lines.dataNotStored);
            return callback(away);
          }
          if (isStorageFailure(err, deps.storage)) return callback(reply(452, INSUFFICIENT_STORAGE));
          log.error({ err }, role.lines.dataNotStored);
          callback(reply(451, '4.3.0 The message could not be stored; try again'));
        });
    },
  };
  if (role.auth) {
    const auth = role.auth.bind(role);
    shared.onAuth = (credentials, session, done) => auth(credentials, session, decided('AUTH', done));
  }
  return role.server(shared);
}

/** A port to listen on: `secure` for implicit TLS; `bound`, the socket the daemon's bind phase bound there. */
export interface ListenerPort {
  port: number;
  secure: boolean;
  bound?: BoundSocket | undefined;
}

/** A server listening on its port (the one bound, when the configuration said 0). */
export interface Listening {
  server: SMTPServer;
  port: number;
  secure: boolean;
}

/**
 * Starts a server per port on `host`, on the bind phase's socket where there is one; when one
 * cannot listen, those started are closed again and its error is thrown. `label` begins the
 * servers' session error lines.
 */
export async function listenOn(
  host: string,
  ports: readonly ListenerPort[],
  log: Logger,
  label: string,
  create: (port: ListenerPort) => SMTPServer,
): Promise<Listening[]> {
  const started: Listening[] = [];
  try {
    for (const port of ports) {
      const server = create(port);
      const bound = await new Promise<number>((resolve, reject) => {
        server.once('error', reject);
        const listening = () => {
          server.removeListener('error', reject);
          resolve((server.server.address() as AddressInfo).port);
        };
        if (port.bound) port.bound.handTo(server.server).then(listening, reject);
        else server.listen(port.port, host, listening);
      });
      server.on('error', logSessionErrors(log, label));
      started.push({ server, port: bound, secure: port.secure });
    }
  } catch (err) {
    await Promise.all(started.map((s) => closeServer(s.server)));
    throw err;
  }
  return started;
}

/** A listener's servers: stopped and given a new certificate together. */
export class SmtpListeners {
  protected constructor(private readonly servers: readonly Listening[]) {}

  /** The bound ports (port 0 in the configuration picks a free one). */
  get ports(): Array<{ port: number; secure: boolean }> {
    return this.servers.map(({ port, secure }) => ({ port, secure }));
  }

  /** Stops accepting; open sessions get the grace period to finish before they are cut. */
  async close(): Promise<void> {
    await Promise.all(this.servers.map((s) => closeServer(s.server)));
  }

  /** A new certificate and key (SIGHUP) for the TLS handshakes from now on; open sessions keep theirs. */
  reloadTls(tls: { cert: Buffer; key: Buffer }): void {
    for (const { server } of this.servers) server.updateSecureContext({ cert: tls.cert, key: tls.key });
  }
}

function closeServer(server: SMTPServer): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
