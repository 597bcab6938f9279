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
import type { Arrival, ArrivalCheck } from '../inbound/authentication.ts';
import { dmarcAction, type DmarcMode } from '../inbound/dmarc-policy.ts';
import { withTraceFields } from '../inbound/trace-fields.ts';
import type { DataSpool, SpooledMessage } from '../message/spool.ts';
import type { InboundRepo } from '../store/inbound-repo.ts';
import type { InboundAuthentication } from '../store/records.ts';
import { Gate } from '../util/gate.ts';
import { newId } from '../util/ids.ts';

export interface InboundOptions extends ListenerOptions {
  port: number;
  /** The socket bound at host:port by the daemon's bind phase, taken over here. */
  bound?: BoundSocket;
  /** `smtp.inbound.dmarc_policy` (default monitor: the verdict is only recorded). */
  dmarcPolicy?: DmarcMode;
}

export interface InboundDeps extends ListenerDeps {
  policy: InboundPolicy;
  intake: Intake;
  repo: InboundRepo;
  /** A spool for one message's DATA (written to the store as it arrives past 1 MiB). */
  newSpool: () => DataSpool;
  /**
   * SPF, DKIM, DMARC, ARC and spamd of a message for routes, once at the end of DATA; `parts`
   * gives its bytes as received, afresh at each call. Absent: mail is stored unchecked.
   */
  checkArrival?: (parts: () => AsyncIterable<Buffer>, arrival: Arrival) => Promise<ArrivalCheck>;
  observer?: InboundObserver;
}

/**
 * Told of each ended session and decided command (listener `inbound`), each recipient's verdict
 * and each message's result (metrics); must not throw.
 */
export interface InboundObserver extends ListenerObserver {
  recipient(verdict: Accepted['kind'] | 'refused' | 'deferred'): void;
  message(result: 'accepted' | 'rejected' | 'deferred'): void;
  /** A message for routes checked at arrival: its DMARC result (`unchecked` when none) and the action taken. */
  dmarc?(result: string, action: 'accept' | 'quarantine' | 'reject'): void;
}

/** The listener's name in metrics. */
const LISTENER = 'inbound';

interface InboundSession extends ListenerSession {
  accepted: Accepted[];
}

/** Checks at arrival of messages spooled to the store (past 1 MiB) running at once. */
const MAX_SPOOLED_CHECKS = 2;

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
  // A message past 1 MiB is read back from the store to be checked: a few at a time, so that many
  // large ones arriving together do not all have their chunks in memory at once.
  const spooledChecks = new Gate(MAX_SPOOLED_CHECKS);
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

    async store(data, session, state, spool) {
      const fields = transaction(session, state);
      const stored = Buffer.isBuffer(data)
        ? { bodyId: newId(), head: data, size: data.length, chunks: chunked(data), spooled: 0 }
        : { bodyId: data.bodyId, head: data.head, size: data.size, chunks: [data.head, ...data.tail], spooled: data.written };
      let authentication: InboundAuthentication | undefined;
      // Mail for routes is checked here, once; bounces and complaints carry their own proof (VERP, the report's sender).
      if (deps.checkArrival && state.accepted.some((a) => a.kind === 'route')) {
        const arrival = { ip: session.remoteAddress, helo: session.hostNameAppearsAs ?? '', sender: fields.sender };
        const check = () => deps.checkArrival!(() => received(data, deps.repo), arrival);
        const checked = Buffer.isBuffer(data) ? await check() : await spooledChecks.run(check);
        const dmarc = checked.authentication.dmarc;
        const action = dmarcAction(options.dmarcPolicy ?? 'monitor', dmarc, Math.random() * 100);
        observer?.dmarc?.(dmarc ? dmarc.result : 'unchecked', action.kind);
        if (action.kind === 'reject') {
          await spool.discard();
          log.info({ ...fields, verdict: 'rejected', reason: action.reason, dmarc: dmarc?.result }, 'inbound message');
          return reply(550, `5.7.1 ${printable(action.reason, 400)}`);
        }
        authentication = { ...checked.authentication, action: action.kind };
        stored.chunks = traced(stored.chunks, checked.header, options.hostname);
      }
      const record = await intake.store({
        id: newId(),
        bodyId: stored.bodyId,
        client: { address: session.remoteAddress, helo: session.hostNameAppearsAs ?? '', tls: session.secure },
        mailFrom: fields.sender,
        recipients: state.accepted,
        size: stored.size,
        headers: summary(stored.head),
        tail: deps.repo.chunkOps(stored.bodyId, stored.chunks, stored.spooled),
        ...(authentication ? { authentication } : {}),
      });
      const size = stored.size;
      const checks = authentication ? { dmarc: authentication.dmarc?.result ?? null, action: authentication.action } : {};
      log.info(
        { ...fields, inbound_id: record.id, size, verdict: 'accepted', kinds: [...new Set(state.accepted.map((a) => a.kind))], ...checks },
        'inbound message',
      );
      // Bounces and complaints are taken in before the answer; a failure leaves them for the next start.
      await intake
        .takeIn(record)
        .catch((err: unknown) => log.error({ err, inbound_id: record.id }, 'inbound bounce or complaint not taken in yet; retried on the next start'));
      return `2.0.0 Ok: queued as ${record.id}`;
    },

    settled: (result) => observer?.message(result),
  };
}

/** The message's bytes as received: in memory, or its header block, the chunks spooled to the store, then the rest. */
async function* received(data: Buffer | SpooledMessage, repo: InboundRepo): AsyncGenerator<Buffer> {
  if (Buffer.isBuffer(data)) {
    yield data;
    return;
  }
  yield data.head;
  if (data.written > 0) yield* repo.body(data.bodyId);
  yield* data.tail;
}

/** The chunks to store with the trace fields on top of the first (which holds the header block, or begins with it). */
function traced(chunks: Buffer[], trace: string, hostname: string): Buffer[] {
  const first = chunks[0]!;
  const end = headerBlockEnd(first);
  return [withTraceFields(first.subarray(0, end), trace, hostname), ...(end < first.length ? [first.subarray(end)] : []), ...chunks.slice(1)];
}

/** Where the header block ends (after its empty line), or the buffer's length when it holds no body. */
function headerBlockEnd(buffer: Buffer): number {
  const crlf = buffer.indexOf('\r\n\r\n');
  const lf = buffer.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return crlf + 4;
  return lf >= 0 ? lf + 2 : buffer.length;
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
