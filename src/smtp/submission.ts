import type { Accounts } from '../accounts/accounts.ts';
import type { DomainRecord } from '../store/records.ts';
import type { Relay, Relayer } from '../message/relay.ts';
import { isClientError } from '../message/relay.ts';
import { CreditExhausted } from '../accounts/usage.ts';
import type { BoundSocket } from '../util/bound-socket.ts';
import { cidrContains, parseClientIp, type Cidr } from '../util/cidr.ts';
import { isUtf8MailboxAddress } from '../util/email.ts';
import { Gate } from '../util/gate.ts';
import { AuthAfterTlsServer, ENCRYPTION_REQUIRED } from './auth-after-tls.ts';
import type { AuthFailures } from './auth-throttle.ts';
import { envelopeAddress } from './envelope-address.ts';
import {
  listenerServer,
  listenOn,
  SmtpListeners,
  tooManyRecipients,
  type ListenerDeps,
  type ListenerOptions,
  type ListenerRole,
  type ListenerSession,
} from './listener.ts';
import { printable, reply } from './session-limits.ts';
import { sharedStoreRefusal } from './storage-reply.ts';

/** What AUTH needs to know of a credential (implemented by accounts/SmtpCredentials). */
export interface CredentialCheck {
  authenticate(
    username: string,
    password: string,
  ): Promise<{ id: string; accountId: string; sandbox: boolean; scope: 'global' | 'scoped'; domains: string[] } | null>;
  /** Whether the credential still exists (a deleted one ends its sessions' sending). */
  exists(id: string): Promise<boolean>;
}

export interface SubmissionOptions extends ListenerOptions {
  /** Listeners to open; `secure` for implicit TLS (465), otherwise STARTTLS (587). */
  ports: Array<{ port: number; secure: boolean; bound?: BoundSocket }>;
  /** Clients that may AUTH without TLS (local applications). */
  plainAuthFrom: Cidr[];
}

export interface SubmissionDeps extends ListenerDeps {
  credentials: CredentialCheck;
  accounts: Pick<Accounts, 'get'>;
  relay: Relay;
  throttle: AuthFailures;
}

/** What a session learns at AUTH and MAIL FROM. */
interface SessionUser {
  credentialId: string;
  username: string;
  relayer: Relayer;
}

interface SubmissionSession extends ListenerSession {
  domain?: DomainRecord;
}

/**
 * The submission listeners (smtp-server): STARTTLS and implicit TLS, AUTH PLAIN/LOGIN with SMTP
 * credentials, only after TLS except from the configured local clients (loopback by default). MAIL FROM must be a domain the credential may
 * use, and so must the header From unless the account is set to allow any (forwarding); DATA is accepted through the Relay and answered 250 only once it is durably stored.
 */
export class SubmissionListeners extends SmtpListeners {
  static async start(options: SubmissionOptions, deps: SubmissionDeps): Promise<SubmissionListeners> {
    const started = await listenOn(options.host, options.ports, deps.log, 'SMTP submission', ({ secure }) =>
      listenerServer(options, deps, submissionRole(options, deps, secure)),
    );
    deps.log.info({ host: options.host, ports: started.map((s) => ({ port: s.port, tls: s.secure ? 'implicit' : 'starttls' })) }, 'SMTP submission listening');
    return new SubmissionListeners(started);
  }
}

/** Password checks (scrypt, in libuv's pool) running at once per listener; more wait their turn. */
const MAX_VERIFYING = 2;
/** Password checks waiting their turn at most; past it AUTH gets 454 at once. */
const MAX_WAITING = 64;

const TOO_MANY_FAILURES = '4.7.0 Too many failed authentication attempts; try again later';

function submissionRole(options: SubmissionOptions, deps: SubmissionDeps, secure: boolean): ListenerRole<SubmissionSession> {
  const { credentials, accounts, relay, throttle, log } = deps;
  const gate = new Gate(MAX_VERIFYING, MAX_WAITING);
  return {
    name: secure ? 'submission-tls' : 'submission-starttls',
    lines: {
      tooManyConnections: 'SMTP connection refused: too many from this address',
      spoolNotDeleted: 'could not delete the chunks of an unfinished message',
      dataIncomplete: 'SMTP DATA not completed: the client disconnected or timed out; nothing stored',
      dataNotStored: 'SMTP DATA could not be stored',
    },
    newSession: () => ({}),
    server: (shared) =>
      new AuthAfterTlsServer(
        { ...shared, secure, banner: 'Postilion submission', authMethods: ['PLAIN', 'LOGIN'], authOptional: false },
        options.deadlines,
        (address) => mayAuthInClear(address, options.plainAuthFrom),
      ),

    auth(auth, session, callback) {
      const address = session.remoteAddress;
      // A backstop: AuthAfterTlsServer already refused AUTH in clear before reading the credentials.
      if (!session.secure && !mayAuthInClear(address, options.plainAuthFrom)) return callback(reply(538, ENCRYPTION_REQUIRED));
      // This node's count answers at once; the cluster's (in Redis) once it has answered, below.
      const early = throttle.blocked(address);
      if (early === true) return callback(reply(454, TOO_MANY_FAILURES));
      // A flood of guesses must not tie up the thread pool that the store and DKIM signing share.
      // Password checks wait their turn two at a time, so a burst of guesses is slowed to the pace
      // of scrypt and meets the limit after a few failures; parallel logins of one application pass.
      if (gate.full) return callback(reply(454, '4.7.0 Too many authentications in progress; try again shortly'));
      void (async () => {
        if (early !== false && (await early)) return callback(reply(454, TOO_MANY_FAILURES));
        // The limit is asked again once the check's turn has come, and a failure counted before the
        // next check starts: the guesses queued ahead of this one may have reached the limit.
        const credential = await gate.run(async () => {
          const blocked = throttle.blocked(address);
          if (blocked === true || (blocked !== false && (await blocked))) return 'blocked';
          const found = await credentials.authenticate(auth.username ?? '', auth.password ?? '');
          if (!found) {
            const counted = throttle.fail(address);
            if (counted) await counted;
          }
          return found;
        });
        if (credential === 'blocked') return callback(reply(454, TOO_MANY_FAILURES));
        if (!credential) {
          log.warn({ client: address, username: printable(auth.username ?? '') }, 'SMTP AUTH failed');
          return callback(reply(535, '5.7.8 Authentication credentials invalid'));
        }
        const account = await accounts.get(credential.accountId);
        if (account?.status !== 'active')
          return callback(reply(535, `5.7.8 The account of this credential ${account?.status === 'deleted' ? 'has been deleted' : 'is suspended'}`));
        void throttle.succeed(address);
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

    mailFrom(address, session, state, callback) {
      const normal = envelopeAddress(address.address);
      if (normal === null) return callback(reply(553, `5.1.7 ${printable(address.address)} is not a valid sender address`));
      // One form (A-label domain) from here on: the sender domain is looked up by it.
      address.address = normal;
      void (async () => {
        const user = session.user as SessionUser;
        if (!(await credentials.exists(user.credentialId))) return callback(reply(535, '5.7.8 This credential no longer exists'));
        const account = await accounts.get(user.relayer.account.id);
        if (account?.status !== 'active')
          return callback(reply(550, `5.7.1 The account of this credential ${account?.status === 'deleted' ? 'has been deleted' : 'is suspended'}`));
        const relayer = { ...user.relayer, account };
        user.relayer = relayer;
        try {
          state.domain = await relay.senderDomain(relayer, address.address);
          callback();
        } catch (err) {
          if (!isClientError(err)) throw err;
          callback(reply(550, `5.7.1 ${err.message}`));
        }
      })().catch((err: unknown) => {
        const away = sharedStoreRefusal(err);
        if (away) log.warn({ reason: (err as Error).message }, 'SMTP MAIL FROM check failed');
        else log.error({ err }, 'SMTP MAIL FROM check failed');
        callback(away ?? reply(451, '4.3.0 Temporary failure; try again'));
      });
    },

    rcptTo(address, session, _state, callback) {
      if (session.envelope.rcptTo.length >= options.maxRecipients) return callback(tooManyRecipients(options.maxRecipients));
      // listener-server.ts let a non-ASCII address through only under SMTPUTF8 (RFC 6531).
      const normal = envelopeAddress(address.address);
      if (normal === null || !isUtf8MailboxAddress(normal)) return callback(reply(553, `5.1.3 ${printable(address.address)} is not a valid recipient address`));
      address.address = normal;
      callback();
    },

    newSpool: () => relay.newSpool(),
    transaction: (session) => ({ client: session.remoteAddress }),

    refused(session, _state, reason, code) {
      if (code === 554) log.info({ client: session.remoteAddress, reason }, 'SMTP message refused');
    },

    async store(raw, session, state, spool) {
      const user = session.user as SessionUser;
      const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
      const to = session.envelope.rcptTo.map((r) => r.address);
      let domain = state.domain!;
      // What Postilion signs aligns for DMARC: the header From at a domain of the credential, the message signed with it.
      if (user.relayer.account.smtpHeaderFrom !== 'any') {
        try {
          domain = (await relay.headerFromDomain(user.relayer, Buffer.isBuffer(raw) ? raw : raw.head, domain)) ?? domain;
        } catch (err) {
          await spool.discard();
          if (!isClientError(err)) throw err;
          log.info({ account_id: user.relayer.account.id, client: session.remoteAddress, reason: err.message }, 'SMTP message refused');
          return reply(550, `5.7.1 ${printable(err.message, 300)}`);
        }
      }
      try {
        const client = { helo: session.hostNameAppearsAs ?? '', address: session.remoteAddress, tls: session.secure };
        const accepted = await relay.accept(user.relayer, domain, from, to, raw, client);
        log.info(
          { account_id: user.relayer.account.id, message_ids: accepted.map((m) => m.id), recipients: to.length, sandbox: accepted[0]?.sandbox ?? null },
          'SMTP message accepted',
        );
        return `2.0.0 Ok: queued as ${accepted[0]!.id}${accepted.length > 1 ? ` (+${accepted.length - 1} more)` : ''}`;
      } catch (err) {
        await spool.discard();
        if (!isClientError(err)) throw err;
        return reply(550, `${err instanceof CreditExhausted ? '5.7.1' : '5.6.0'} ${err.message}`);
      }
    },
  };
}

function mayAuthInClear(address: string, allowed: Cidr[]): boolean {
  const ip = parseClientIp(address);
  return ip !== null && allowed.some((cidr) => cidrContains(cidr, ip));
}
