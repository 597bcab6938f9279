import type { SMTPServerSession } from 'smtp-server';
import type { BoundSocket } from '../util/bound-socket.ts';
import { printable, reply } from './session-limits.ts';
import { sharedStoreRefusal } from './storage-reply.ts';
import { envelopeAddress } from './envelope-address.ts';
import { ListenerServer } from './listener-server.ts';
import {
  listenerServer,
  listenOn,
  SmtpListeners,
  tooManyRecipients,
  type ListenerDeps,
  type ListenerObserver,
  type ListenerOptions,
  type ListenerRole,
  type ListenerSession,
} from './listener.ts';
import type { Accepted, InboundPolicy } from '../inbound/policy.ts';
import type { HeaderSummary, Intake } from '../inbound/intake.ts';
import type { DataSpool } from '../message/spool.ts';
import type { InboundRepo } from '../store/inbound-repo.ts';
import { newId } from '../util/ids.ts';

export interface InboundOptions extends ListenerOptions {
  port: number;
  /** The socket bound at host:port by the daemon's bind phase, taken over here. */
  bound?: BoundSocket;
}

export interface InboundDeps extends ListenerDeps {
  policy: InboundPolicy;
  intake: Intake;
  repo: InboundRepo;
  /** A spool for one message's DATA (written to the store as it arrives past 1 MiB). */
  newSpool: () => DataSpool;
  observer?: InboundObserver;
}

/**
 * Told of each ended session and decided command (listener `inbound`), each recipient's verdict
 * and each message's result (metrics); must not throw.
 */
export interface InboundObserver extends ListenerObserver {
  recipient(verdict: Accepted['kind'] | 'refused' | 'deferred'): void;
  message(result: 'accepted' | 'rejected' | 'deferred'): void;
}

/** The listener's name in metrics. */
const LISTENER = 'inbound';

interface InboundSession extends ListenerSession {
  accepted: Accepted[];
}

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
export class InboundListener extends SmtpListeners {
  static async start(options: InboundOptions, deps: InboundDeps): Promise<InboundListener> {
    const ports = [{ port: options.port, secure: false, bound: options.bound }];
    const started = await listenOn(options.host, ports, deps.log, 'inbound SMTP', () => listenerServer(options, deps, inboundRole(options, deps)));
    deps.log.info({ host: options.host, port: started[0]!.port }, 'inbound SMTP listening');
    return new InboundListener(started);
  }

  /** The bound port (port 0 in the configuration picks a free one). */
  get port(): number {
    return this.ports[0]!.port;
  }
}

function inboundRole(options: InboundOptions, deps: InboundDeps): ListenerRole<InboundSession> {
  const { policy, intake, log, observer } = deps;
  const transaction = (session: SMTPServerSession, state: InboundSession) => ({
    client: session.remoteAddress,
    sender: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
    recipients: state.accepted.map((a) => a.address),
  });
  return {
    name: LISTENER,
    lines: {
      tooManyConnections: 'inbound SMTP connection refused: too many from this address',
      spoolNotDeleted: 'could not delete the chunks of an unfinished inbound message',
      dataIncomplete: 'inbound DATA not completed: the client disconnected or timed out; nothing stored',
      dataNotStored: 'inbound DATA could not be stored',
    },
    newSession: () => ({ accepted: [] }),
    server: (shared) => new ListenerServer({ ...shared, banner: 'Postilion', authOptional: true, disabledCommands: ['AUTH'] }, options.deadlines),

    mailFrom(_address, _session, state, answer) {
      state.accepted = [];
      answer();
    },

    rcptTo(address, session, state, answer) {
      if (state.accepted.length >= options.maxRecipients) {
        observer?.recipient('deferred');
        return answer(tooManyRecipients(options.maxRecipients));
      }
      // The domain in its A-label form (listener-server.ts let UTF-8 through only under SMTPUTF8).
      const normal = envelopeAddress(address.address);
      if (normal === null) return answer(reply(553, `5.1.3 ${printable(address.address, 200)} is not a valid recipient address`));
      address.address = normal;
      policy.decide(address.address).then(
        (decision) => {
          if (decision.kind === 'refused') {
            log.info(
              {
                client: session.remoteAddress,
                sender: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
                recipient: printable(address.address, 200),
                verdict: 'refused',
                reason: decision.reason,
              },
              'inbound recipient refused',
            );
            observer?.recipient('refused');
            return answer(reply(550, `5.7.1 ${printable(address.address, 200)}: ${decision.reason}`));
          }
          state.accepted.push(decision);
          observer?.recipient(decision.kind);
          answer();
        },
        (err: unknown) => {
          const away = sharedStoreRefusal(err);
          if (away) log.warn({ reason: (err as Error).message }, 'inbound recipient check failed');
          else log.error({ err }, 'inbound recipient check failed');
          observer?.recipient('deferred');
          answer(away ?? reply(451, '4.3.0 Temporary failure; try again'));
        },
      );
    },

    newSpool: deps.newSpool,
    transaction,

    refused(session, state, reason) {
      log.info({ ...transaction(session, state), verdict: 'refused', reason }, 'inbound message');
    },

    async store(data, session, state) {
      const fields = transaction(session, state);
      const stored = Buffer.isBuffer(data)
        ? { bodyId: newId(), head: data, size: data.length, chunks: chunked(data), spooled: 0 }
        : { bodyId: data.bodyId, head: data.head, size: data.size, chunks: [data.head, ...data.tail], spooled: data.written };
      const record = await intake.store({
        id: newId(),
        bodyId: stored.bodyId,
        client: { address: session.remoteAddress, helo: session.hostNameAppearsAs ?? '', tls: session.secure },
        mailFrom: fields.sender,
        recipients: state.accepted,
        size: stored.size,
        headers: summary(stored.head),
        tail: deps.repo.chunkOps(stored.bodyId, stored.chunks, stored.spooled),
      });
      const size = stored.size;
      log.info({ ...fields, inbound_id: record.id, size, verdict: 'accepted', kinds: [...new Set(state.accepted.map((a) => a.kind))] }, 'inbound message');
      // Bounces and complaints are taken in before the answer; a failure leaves them for the next start.
      await intake
        .takeIn(record)
        .catch((err: unknown) => log.error({ err, inbound_id: record.id }, 'inbound bounce or complaint not taken in yet; retried on the next start'));
      return `2.0.0 Ok: queued as ${record.id}`;
    },

    settled: (result) => observer?.message(result),
  };
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
