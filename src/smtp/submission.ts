import type { AddressInfo } from 'node:net';
import { PerAddressLimit, printable, reply } from './session-limits.ts';
import { INSUFFICIENT_STORAGE, isStorageFailure, storageRefusal, type StorageState } from './storage-reply.ts';
import type { Logger } from 'pino';
import type { BoundSocket } from '../util/bound-socket.ts';
import type { SMTPServer, SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import type { Accounts } from '../accounts/accounts.ts';
import type { DomainRecord } from '../store/records.ts';
import type { Relay, Relayer } from '../message/relay.ts';
import { isClientError } from '../message/relay.ts';
import { CreditExhausted } from '../accounts/usage.ts';
import { receiveData, type DataSpool } from '../message/spool.ts';
import { cidrContains, parseClientIp, type Cidr } from '../util/cidr.ts';
import { isUtf8MailboxAddress } from '../util/email.ts';
import { AuthAfterTlsServer, ENCRYPTION_REQUIRED } from './auth-after-tls.ts';
import { envelopeAddress } from './envelope-address.ts';
import { checkLines } from './line-check.ts';
import { isClientGone, logSessionErrors, type Deadlines } from './listener-server.ts';
import { Gate } from '../util/gate.ts';
import type { AuthThrottle } from './auth-throttle.ts';

/** What AUTH needs to know of a credential (implemented by accounts/SmtpCredentials). */
export interface CredentialCheck {
  authenticate(username: string, password: string): Promise<{ id: string; accountId: string; sandbox: boolean; scope: 'global' | 'scoped'; domains: string[] } | null>;
  /** Whether the credential still exists (a deleted one ends its sessions' sending). */
  exists(id: string): Promise<boolean>;
}

export interface SubmissionOptions {
  host: string;
  /** Listeners to open; `secure` for implicit TLS (465), otherwise STARTTLS (587). */
  ports: Array<{ port: number; secure: boolean; bound?: BoundSocket }>;
  hostname: string;
  tls: { cert: Buffer; key: Buffer };
  maxMessageBytes: number;
  maxRecipients: number;
  /** Clients that may AUTH without TLS (local applications). */
  plainAuthFrom: Cidr[];
  /** On close, how long sessions may take to finish before they are cut. */
  graceMs: number;
  /** Sessions one client address may hold at once per listener; more are refused with 421. */
  maxConnectionsPerAddress: number;
  /** Per command line and per DATA (smtp.command_deadline_seconds, smtp.data_deadline_seconds). */
  deadlines: Deadlines;
}

/** Told of each ended session and each decided command (metrics); must not throw. */
export interface SubmissionObserver {
  /** `result`: `message` when the session had a message accepted, `none` otherwise. */
  session(listener: string, result: 'message' | 'none'): void;
  /** `result` by the reply: accepted (2xx/3xx), deferred (4xx), rejected (5xx). */
  command(listener: string, command: 'CONNECT' | 'AUTH' | 'MAIL' | 'RCPT' | 'DATA', result: 'accepted' | 'deferred' | 'rejected'): void;
}

export interface SubmissionDeps {
  credentials: CredentialCheck;
  accounts: Pick<Accounts, 'get'>;
  relay: Relay;
  throttle: AuthThrottle;
  log: Logger;
  observer?: SubmissionObserver;
  /** The storage guard: new mail is refused with 452 4.3.1 while the store cannot take writes. */
  storage?: StorageState;
}

/** What a session learns at AUTH and MAIL FROM. */
interface SessionUser {
  credentialId: string;
  username: string;
  relayer: Relayer;
}

interface SessionState {
  domain?: DomainRecord;
  /** The spool of a DATA under way: discarded when the session ends before it is settled. */
  spool?: DataSpool;
  /** Whether a message of this session was accepted. */
  accepted?: boolean;
  /** Whether the session was counted against its address (refused connections are not). */
  counted?: boolean;
}

/**
 * The submission listeners (smtp-server): STARTTLS and implicit TLS, AUTH PLAIN/LOGIN with SMTP
 * credentials, only after TLS except from the configured local clients (loopback by default). MAIL FROM must be a domain the credential may
 * use; DATA is accepted through the Relay and answered 250 only once it is durably stored.
 */
export class SubmissionListeners {
  private constructor(
    private readonly servers: Array<{ server: SMTPServer; port: number; secure: boolean }>,
  ) {}

  static async start(options: SubmissionOptions, deps: SubmissionDeps): Promise<SubmissionListeners> {
    const started: Array<{ server: SMTPServer; port: number; secure: boolean }> = [];
    try {
      for (const { port, secure, bound: socket } of options.ports) {
        const server = createServer(options, deps, secure);
        const bound = await new Promise<number>((resolve, reject) => {
          server.once('error', reject);
          const listening = () => {
            server.removeListener('error', reject);
            resolve((server.server.address() as AddressInfo).port);
          };
          // The socket the daemon's bind phase bound at this port, or one bound now.
          if (socket) socket.handTo(server.server).then(listening, reject);
          else server.listen(port, options.host, listening);
        });
        server.on('error', logSessionErrors(deps.log, 'SMTP submission'));
        started.push({ server, port: bound, secure });
      }
    } catch (err) {
      await Promise.all(started.map((s) => closeServer(s.server)));
      throw err;
    }
    deps.log.info({ host: options.host, ports: started.map((s) => ({ port: s.port, tls: s.secure ? 'implicit' : 'starttls' })) }, 'SMTP submission listening');
    return new SubmissionListeners(started);
  }

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

/** Password checks (scrypt, in libuv's pool) running at once per listener; more wait their turn. */
const MAX_VERIFYING = 2;
/** Password checks waiting their turn at most; past it AUTH gets 454 at once. */
const MAX_WAITING = 64;
/** Sessions per listener at most. */
const MAX_CLIENTS = 1000;

const TOO_MANY_FAILURES = '4.7.0 Too many failed authentication attempts; try again later';

function createServer(options: SubmissionOptions, deps: SubmissionDeps, secure: boolean): SMTPServer {
  const { credentials, accounts, relay, throttle, log } = deps;
  const gate = new Gate(MAX_VERIFYING, MAX_WAITING);
  const listener = secure ? 'submission-tls' : 'submission-starttls';
  const observer = deps.observer;
  /** Counts a command's outcome by the reply its callback gets, then gives the reply. */
  const decided = <A extends unknown[]>(command: Parameters<SubmissionObserver['command']>[1], callback: (err?: Error | null, ...rest: A) => void) =>
    (err?: Error | null, ...rest: A) => {
      const code = (err as { responseCode?: number } | null | undefined)?.responseCode;
      observer?.command(listener, command, !err ? 'accepted' : code !== undefined && code < 500 ? 'deferred' : 'rejected');
      callback(err, ...rest);
    };
  /** Open sessions per client address: one address must not hold every slot of the listener. */
  const perAddress = new PerAddressLimit(options.maxConnectionsPerAddress);
  return new AuthAfterTlsServer({
    secure,
    key: options.tls.key,
    cert: options.tls.cert,
    name: options.hostname,
    // smtp-server writes "<name> ESMTP <banner>": the banner must not say ESMTP again.
    banner: 'Postilion submission',
    size: options.maxMessageBytes,
    authMethods: ['PLAIN', 'LOGIN'],
    authOptional: false,
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
        log.info({ client: address, open: perAddress.count(address) }, 'SMTP connection refused: too many from this address');
        return callback(reply(421, `4.7.0 Too many connections from ${address}; try again later`));
      }
      stateOf(session).counted = true;
      callback();
    },

    onClose(session) {
      const state = stateOf(session);
      if (state.spool?.unsettled) void state.spool.discard().catch((err: unknown) => log.error({ err }, 'could not delete the chunks of an unfinished message'));
      if (state.counted) {
        perAddress.release(session.remoteAddress);
        observer?.session(listener, state.accepted ? 'message' : 'none');
      }
    },

    onAuth(auth, session, done) {
      const callback = decided('AUTH', done);
      const address = session.remoteAddress;
      // A backstop: AuthAfterTlsServer already refused AUTH in clear before reading the credentials.
      if (!session.secure && !mayAuthInClear(address, options.plainAuthFrom)) return callback(reply(538, ENCRYPTION_REQUIRED));
      if (throttle.blocked(address)) return callback(reply(454, TOO_MANY_FAILURES));
      // A flood of guesses must not tie up the thread pool that the store and DKIM signing share.
      // Password checks wait their turn two at a time, so a burst of guesses is slowed to the pace
      // of scrypt and meets the limit after a few failures; parallel logins of one application pass.
      if (gate.full) return callback(reply(454, '4.7.0 Too many authentications in progress; try again shortly'));
      void (async () => {
        // The limit is asked again once the check's turn has come, and a failure counted before the
        // next check starts: the guesses queued ahead of this one may have reached the limit.
        const credential = await gate.run(async () => {
          if (throttle.blocked(address)) return 'blocked';
          const found = await credentials.authenticate(auth.username ?? '', auth.password ?? '');
          if (!found) throttle.fail(address);
          return found;
        });
        if (credential === 'blocked') return callback(reply(454, TOO_MANY_FAILURES));
        if (!credential) {
          log.warn({ client: address, username: printable(auth.username ?? '') }, 'SMTP AUTH failed');
          return callback(reply(535, '5.7.8 Authentication credentials invalid'));
        }
        const account = await accounts.get(credential.accountId);
        if (account?.status !== 'active') return callback(reply(535, `5.7.8 The account of this credential ${account?.status === 'deleted' ? 'has been deleted' : 'is suspended'}`));
        throttle.succeed(address);
        const user: SessionUser = {
          credentialId: credential.id,
          username: auth.username ?? '',
          relayer: { account, domains: credential.scope === 'global' ? null : credential.domains, sandbox: credential.sandbox },
        };
        callback(null, { user });
      })().catch((err: unknown) => {
        log.error({ err }, 'SMTP AUTH check failed');
        callback(reply(454, '4.7.0 Temporary authentication failure'));
      });
    },

    onMailFrom(address, session, done) {
      const callback = decided('MAIL', done);
      const full = storageRefusal(deps.storage);
      if (full) return callback(full);
      const normal = envelopeAddress(address.address);
      if (normal === null) return callback(reply(553, `5.1.7 ${printable(address.address)} is not a valid sender address`));
      // One form (A-label domain) from here on: the sender domain is looked up by it.
      address.address = normal;
      void (async () => {
        const user = session.user as SessionUser;
        if (!(await credentials.exists(user.credentialId))) return callback(reply(535, '5.7.8 This credential no longer exists'));
        const account = await accounts.get(user.relayer.account.id);
        if (account?.status !== 'active') return callback(reply(550, `5.7.1 The account of this credential ${account?.status === 'deleted' ? 'has been deleted' : 'is suspended'}`));
        const relayer = { ...user.relayer, account };
        user.relayer = relayer;
        try {
          stateOf(session).domain = await relay.senderDomain(relayer, address.address);
          callback();
        } catch (err) {
          if (!isClientError(err)) throw err;
          callback(reply(550, `5.7.1 ${err.message}`));
        }
      })().catch((err: unknown) => {
        log.error({ err }, 'SMTP MAIL FROM check failed');
        callback(reply(451, '4.3.0 Temporary failure; try again'));
      });
    },

    onRcptTo(address, session, done) {
      const callback = decided('RCPT', done);
      if (session.envelope.rcptTo.length >= options.maxRecipients) {
        return callback(reply(452, `4.5.3 Too many recipients: at most ${options.maxRecipients} per message`));
      }
      // listener-server.ts let a non-ASCII address through only under SMTPUTF8 (RFC 6531).
      const normal = envelopeAddress(address.address);
      if (normal === null || !isUtf8MailboxAddress(normal)) return callback(reply(553, `5.1.3 ${printable(address.address)} is not a valid recipient address`));
      address.address = normal;
      callback();
    },

    onData(stream, session, done) {
      const callback = decided('DATA', done);
      const spool = relay.newSpool();
      stateOf(session).spool = spool;
      const lines = checkLines(stream);
      receiveData(lines, options.maxMessageBytes, spool).then(
        async (raw) => {
          if (raw === null) {
            await spool.discard();
            return callback(reply(552, `5.3.4 Message too big: at most ${options.maxMessageBytes} bytes`));
          }
          if (lines.problem !== null) {
            await spool.discard();
            log.info({ client: session.remoteAddress, reason: lines.problem }, 'SMTP message refused');
            return callback(reply(554, `5.6.0 ${lines.problem}`));
          }
          const user = session.user as SessionUser;
          const domain = stateOf(session).domain!;
          const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
          const to = session.envelope.rcptTo.map((r) => r.address);
          try {
            const client = { helo: session.hostNameAppearsAs ?? '', address: session.remoteAddress, tls: session.secure };
            const accepted = await relay.accept(user.relayer, domain, from, to, raw, client);
            log.info({ account_id: user.relayer.account.id, message_ids: accepted.map((m) => m.id), recipients: to.length, sandbox: accepted[0]?.sandbox ?? null }, 'SMTP message accepted');
            stateOf(session).accepted = true;
            callback(null, `2.0.0 Ok: queued as ${accepted[0]!.id}${accepted.length > 1 ? ` (+${accepted.length - 1} more)` : ''}`);
          } catch (err) {
            await spool.discard();
            if (!isClientError(err)) throw err;
            callback(reply(550, `${err instanceof CreditExhausted ? '5.7.1' : '5.6.0'} ${err.message}`));
          }
        },
      ).catch((err: unknown) => {
        void spool.discard().catch(() => undefined);
        if (isClientError(err)) return callback(reply(552, `5.3.4 ${err.message}`));
        if (isStorageFailure(err, deps.storage)) return callback(reply(452, INSUFFICIENT_STORAGE));
        // The client left or was cut at the DATA deadline: its message was never complete, nothing of ours failed.
        if (isClientGone(err)) {
          log.info({ client: session.remoteAddress, code: (err as { code?: string }).code }, 'SMTP DATA not completed: the client disconnected or timed out; nothing stored');
          return callback(reply(451, '4.4.2 The message was not received in full'));
        }
        log.error({ err }, 'SMTP DATA could not be stored');
        callback(reply(451, '4.3.0 The message could not be stored; try again'));
      });
    },
  }, options.deadlines, (address) => mayAuthInClear(address, options.plainAuthFrom));
}

function stateOf(session: SMTPServerSession): SessionState {
  const holder = session as SMTPServerSession & { postilion?: SessionState };
  holder.postilion ??= {};
  return holder.postilion;
}


function mayAuthInClear(address: string, allowed: Cidr[]): boolean {
  const ip = parseClientIp(address);
  return ip !== null && allowed.some((cidr) => cidrContains(cidr, ip));
}


function closeServer(server: SMTPServer): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
