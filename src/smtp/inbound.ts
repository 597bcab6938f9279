import type { AddressInfo } from 'node:net';
import { PerAddressLimit, printable, reply } from './session-limits.ts';
import { INSUFFICIENT_STORAGE, isStorageFailure, storageRefusal, type StorageState } from './storage-reply.ts';
import type { Logger } from 'pino';
import type { BoundSocket } from '../util/bound-socket.ts';
import type { SMTPServer, SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import { envelopeAddress } from './envelope-address.ts';
import { checkLines } from './line-check.ts';
import { isClientGone, ListenerServer, logSessionErrors, type Deadlines } from './listener-server.ts';
import type { Accepted, InboundPolicy } from '../inbound/policy.ts';
import type { HeaderSummary, Intake } from '../inbound/intake.ts';
import { receiveData, type DataSpool } from '../message/spool.ts';
import type { InboundRepo } from '../store/inbound-repo.ts';
import { AppError } from '../util/errors.ts';
import { newId } from '../util/ids.ts';
import type { SubmissionObserver } from './submission.ts';

export interface InboundOptions {
  host: string;
  port: number;
  /** The socket bound at host:port by the daemon's bind phase, taken over here. */
  bound?: BoundSocket;
  hostname: string;
  tls: { cert: Buffer; key: Buffer };
  maxMessageBytes: number;
  maxRecipients: number;
  maxConnectionsPerAddress: number;
  /** On close, how long sessions may take to finish before they are cut. */
  graceMs: number;
  /** Per command line and per DATA (smtp.command_deadline_seconds, smtp.data_deadline_seconds). */
  deadlines: Deadlines;
}

export interface InboundDeps {
  policy: InboundPolicy;
  intake: Intake;
  repo: InboundRepo;
  /** A spool for one message's DATA (written to the store as it arrives past 1 MiB). */
  newSpool: () => DataSpool;
  log: Logger;
  observer?: InboundObserver;
  /** The storage guard: new mail is refused with 452 4.3.1 while the store cannot take writes. */
  storage?: StorageState;
}

/**
 * Told of each ended session and decided command (listener `inbound`), each recipient's verdict
 * and each message's result (metrics); must not throw.
 */
export interface InboundObserver extends SubmissionObserver {
  recipient(verdict: Accepted['kind'] | 'refused' | 'deferred'): void;
  message(result: 'accepted' | 'rejected' | 'deferred'): void;
}

/** The listener's name in metrics. */
const LISTENER = 'inbound';

interface SessionState {
  accepted: Accepted[];
  counted?: boolean;
  /** A message of the session was accepted. */
  delivered?: boolean;
  /** The spool of a DATA under way: discarded when the session ends before it is settled. */
  spool?: DataSpool;
}

/** Sessions at most. */
const MAX_CLIENTS = 1000;
/** Bytes of a chunk of a small message stored in its record's batch. */
const CHUNK_BYTES = 256 * 1024;

function chunked(raw: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < raw.length; at += CHUNK_BYTES) out.push(raw.subarray(at, at + CHUNK_BYTES));
  return out.length > 0 ? out : [raw];
}

/**
 * The inbound MX (port 25): smtp-server with STARTTLS and no AUTH. RCPT TO is accepted only for
 * what the InboundPolicy accepts (a route's address, a VERP return path, a complaint address);
 * anything else gets 550 5.7.1 with the reason. DATA past 1 MiB is written to the store as it
 * arrives, in synced chunks of 1 MiB (never held whole in memory), and answered 250 once the
 * record and its jobs are durable.
 */
export class InboundListener {
  private constructor(
    private readonly server: SMTPServer,
    readonly port: number,
  ) {}

  static async start(options: InboundOptions, deps: InboundDeps): Promise<InboundListener> {
    const server = createServer(options, deps);
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      const listening = () => {
        server.removeListener('error', reject);
        resolve((server.server.address() as AddressInfo).port);
      };
      if (options.bound) options.bound.handTo(server.server).then(listening, reject);
      else server.listen(options.port, options.host, listening);
    });
    server.on('error', logSessionErrors(deps.log, 'inbound SMTP'));
    deps.log.info({ host: options.host, port }, 'inbound SMTP listening');
    return new InboundListener(server, port);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  reloadTls(tls: { cert: Buffer; key: Buffer }): void {
    this.server.updateSecureContext({ cert: tls.cert, key: tls.key });
  }
}

function createServer(options: InboundOptions, deps: InboundDeps): SMTPServer {
  const { policy, intake, log, observer } = deps;
  const command = (name: 'CONNECT' | 'MAIL' | 'RCPT' | 'DATA', code: number) => observer?.command(LISTENER, name, code < 400 ? 'accepted' : code < 500 ? 'deferred' : 'rejected');
  const perAddress = new PerAddressLimit(options.maxConnectionsPerAddress);
  return new ListenerServer({
    key: options.tls.key,
    cert: options.tls.cert,
    name: options.hostname,
    // smtp-server writes "<name> ESMTP <banner>": the banner must not say ESMTP again.
    banner: 'Postilion',
    size: options.maxMessageBytes,
    authOptional: true,
    disabledCommands: ['AUTH'],
    disableReverseLookup: true,
    hideDSN: true,
    hideREQUIRETLS: true,
    logger: false,
    closeTimeout: Math.max(1, options.graceMs),
    maxClients: MAX_CLIENTS,

    onConnect(session, done) {
      if (!perAddress.take(session.remoteAddress)) {
        log.info({ client: session.remoteAddress, open: perAddress.count(session.remoteAddress) }, 'inbound SMTP connection refused: too many from this address');
        command('CONNECT', 421);
        return done(reply(421, `4.7.0 Too many connections from ${session.remoteAddress}; try again later`));
      }
      stateOf(session).counted = true;
      command('CONNECT', 220);
      done();
    },

    onClose(session) {
      const state = stateOf(session);
      if (state.spool?.unsettled) void state.spool.discard().catch((err: unknown) => log.error({ err }, 'could not delete the chunks of an unfinished inbound message'));
      if (!state.counted) return;
      perAddress.release(session.remoteAddress);
      observer?.session(LISTENER, state.delivered ? 'message' : 'none');
    },

    onMailFrom(_address, session, done) {
      const full = storageRefusal(deps.storage);
      if (full) {
        command('MAIL', 452);
        return done(full);
      }
      stateOf(session).accepted = [];
      command('MAIL', 250);
      done();
    },

    onRcptTo(address, session, done) {
      const state = stateOf(session);
      if (state.accepted.length >= options.maxRecipients) {
        command('RCPT', 452);
        observer?.recipient('deferred');
        return done(reply(452, `4.5.3 Too many recipients: at most ${options.maxRecipients} per message`));
      }
      // The domain in its A-label form (listener-server.ts let UTF-8 through only under SMTPUTF8).
      const normal = envelopeAddress(address.address);
      if (normal === null) return done(reply(553, `5.1.3 ${printable(address.address, 200)} is not a valid recipient address`));
      address.address = normal;
      policy.decide(address.address).then(
        (decision) => {
          if (decision.kind === 'refused') {
            log.info({ client: session.remoteAddress, sender: session.envelope.mailFrom ? session.envelope.mailFrom.address : '', recipient: printable(address.address, 200), verdict: 'refused', reason: decision.reason }, 'inbound recipient refused');
            command('RCPT', 550);
            observer?.recipient('refused');
            return done(reply(550, `5.7.1 ${printable(address.address, 200)}: ${decision.reason}`));
          }
          state.accepted.push(decision);
          command('RCPT', 250);
          observer?.recipient(decision.kind);
          done();
        },
        (err: unknown) => {
          log.error({ err }, 'inbound recipient check failed');
          command('RCPT', 451);
          observer?.recipient('deferred');
          done(reply(451, '4.3.0 Temporary failure; try again'));
        },
      );
    },

    onData(stream, session, done) {
      const state = stateOf(session);
      const spool = deps.newSpool();
      state.spool = spool;
      const sender = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
      const transaction = { client: session.remoteAddress, sender, recipients: state.accepted.map((a) => a.address) };
      const settled = (code: number) => {
        command('DATA', code);
        observer?.message(code < 400 ? 'accepted' : code < 500 ? 'deferred' : 'rejected');
      };
      const lines = checkLines(stream);
      receiveData(lines, options.maxMessageBytes, spool).then(
        async (data) => {
          if (data === null) {
            await spool.discard();
            log.info({ ...transaction, verdict: 'refused', reason: 'too big' }, 'inbound message');
            settled(552);
            return done(reply(552, `5.3.4 Message too big: at most ${options.maxMessageBytes} bytes`));
          }
          if (lines.problem !== null) {
            await spool.discard();
            log.info({ ...transaction, verdict: 'refused', reason: lines.problem }, 'inbound message');
            settled(554);
            return done(reply(554, `5.6.0 ${lines.problem}`));
          }
          const stored = Buffer.isBuffer(data)
            ? { bodyId: newId(), head: data, size: data.length, chunks: chunked(data), spooled: 0 }
            : { bodyId: data.bodyId, head: data.head, size: data.size, chunks: [data.head, ...data.tail], spooled: data.written };
          const record = await intake.store({
            id: newId(),
            bodyId: stored.bodyId,
            client: { address: session.remoteAddress, helo: session.hostNameAppearsAs ?? '', tls: session.secure },
            mailFrom: sender,
            recipients: state.accepted,
            size: stored.size,
            headers: summary(stored.head),
            tail: deps.repo.chunkOps(stored.bodyId, stored.chunks, stored.spooled),
          });
          const size = stored.size;
          log.info({ ...transaction, inbound_id: record.id, size, verdict: 'accepted', kinds: [...new Set(state.accepted.map((a) => a.kind))] }, 'inbound message');
          // Bounces and complaints are taken in before the answer; a failure leaves them for the next start.
          await intake.takeIn(record).catch((err: unknown) => log.error({ err, inbound_id: record.id }, 'inbound bounce or complaint not taken in yet; retried on the next start'));
          state.delivered = true;
          settled(250);
          done(null, `2.0.0 Ok: queued as ${record.id}`);
        },
      ).catch((err: unknown) => {
        void spool.discard().catch(() => undefined);
        if (err instanceof AppError && err.status < 500) {
          settled(552);
          return done(reply(552, `5.3.4 ${err.message}`));
        }
        // The client left or was cut at the DATA deadline: its message was never complete, nothing of ours failed.
        if (isClientGone(err)) {
          log.info({ ...transaction, code: (err as { code?: string }).code }, 'inbound DATA not completed: the client disconnected or timed out; nothing stored');
          settled(451);
          return done(reply(451, '4.4.2 The message was not received in full'));
        }
        if (isStorageFailure(err, deps.storage)) {
          settled(452);
          return done(reply(452, INSUFFICIENT_STORAGE));
        }
        log.error({ err }, 'inbound DATA could not be stored');
        settled(451);
        done(reply(451, '4.3.0 The message could not be stored; try again'));
      });
    },
  }, options.deadlines);
}

/** From, Subject and Message-ID of the header block (unfolded, as sent). */
export function summary(head: Buffer): HeaderSummary {
  const text = head.toString('latin1');
  const end = text.search(/\r?\n\r?\n/);
  const block = (end < 0 ? text : text.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  const header = (name: string) => {
    const m = new RegExp(`^${name}:[ \\t]*(.*)$`, 'im').exec(block);
    return m ? Buffer.from(m[1]!, 'latin1').toString('utf8').trim().slice(0, 998) : '';
  };
  return { from: header('From'), subject: header('Subject'), messageId: header('Message-ID') };
}

function stateOf(session: SMTPServerSession): SessionState {
  const holder = session as SMTPServerSession & { postilion?: SessionState };
  holder.postilion ??= { accepted: [] };
  return holder.postilion;
}


