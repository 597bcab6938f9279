import { createSecureContext, rootCertificates, type SecureContext, type TLSSocket } from 'node:tls';
import { needsSmtpUtf8 } from '../util/email.ts';
import type { Hop } from './router.ts';
import { SmtpClient, type SmtpError } from './smtp-client.ts';
import { checkSession, TlsPolicyError, type SessionTls } from './tls-policy/session-tls.ts';
import { enforced } from './tls-policy/tls-policies.ts';

export interface PoolOptions {
  /** EHLO name. */
  hostname: string;
  messagesPerConnection: number;
  idleTimeoutMs: number;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  tlsRejectUnauthorized: boolean;
  /** A session parked longer than this is checked with RSET before reuse (default 2 s). */
  probeAfterMs?: number;
  /** PEM certificates trusted besides the system's roots when checking MX certificates (a private PKI, tests). */
  extraCa?: string | null | undefined;
}

/** How one send goes out: from which delivery source, and how many messages its session may carry. */
export interface SendVia {
  /** The delivery source (delivery.sources): its name, the local address the session binds to, its EHLO name. */
  source?: { name: string; address: string; ehlo: string } | undefined;
  /** A shaping rule's messages per connection, when below the pool's own limit. */
  messagesPerConnection?: number | undefined;
}

/** What the server answered for one recipient, or why there was no answer; `tls`: what TLS the session had. */
export type SendReply = (
  | { kind: 'reply'; code: number; text: string; command: string }
  | { kind: 'connection'; text: string; tlsMissing: boolean }
  /** Not sent: the hop lacks an extension the message needs (SMTPUTF8); `text` begins with the enhanced code. */
  | { kind: 'unsupported'; enhanced: string; text: string }
) & { tls?: SessionTls | undefined };

interface Session {
  key: string;
  client: SmtpClient;
  sent: number;
  idleTimer: NodeJS.Timeout | null;
  parkedAt: number;
  tls: SessionTls;
}

/**
 * A session parked longer than this is checked with RSET before it carries another message, as
 * Postfix checks a cached session: a server may have dropped it without our noticing.
 */
const PROBE_AFTER_MS = 2000;

/**
 * SMTP client sessions (SmtpClient), reused per hop (address:port). A
 * completed transaction leaves the session ready for the next MAIL FROM (RFC 5321 §4.1.1.4), so
 * it is parked as it is, without a round trip for RSET; one that waited longer than
 * `probeAfterMs` is RSET before reuse, and dropped if that fails. A session is closed after
 * `messagesPerConnection` messages, after `idleTimeoutMs` unused, and at once on any error.
 */
export class SmtpPool {
  private readonly idle = new Map<string, Session[]>();
  /** Every session not yet ended, parked or in use: close() must reach them all. */
  private readonly live = new Set<SmtpClient>();
  private closed = false;
  /** With extra CA certificates: the TLS contexts trusting them, made once (each holds every root), for strict hops and the others. */
  private readonly contexts: { strict: SecureContext; other: SecureContext } | null;

  constructor(private readonly options: PoolOptions) {
    const ca = options.extraCa ? [...rootCertificates, options.extraCa] : null;
    this.contexts = ca ? { strict: createSecureContext({ ca, minVersion: 'TLSv1.2' }), other: createSecureContext({ ca }) } : null;
  }

  /**
   * Sends `message` from `from` to one recipient over a session with `hop`: one buffer, or parts
   * written one after another (line ends are fixed and dots stuffed across them as within one).
   */
  async send(hop: Hop, from: string, to: string, message: Buffer | readonly Buffer[], via: SendVia = {}): Promise<SendReply> {
    let session: Session;
    try {
      session = (await this.take(hop, via)) ?? (await this.open(hop, via));
    } catch (err) {
      if (err instanceof TlsPolicyError) return { kind: 'connection', text: err.message, tlsMissing: true, tls: err.tls };
      const failure = connectionFailure(err);
      // No STARTTLS where a policy needs it: a TLS failure to report, not an unreachable host.
      if (hop.policy && failure.kind === 'connection' && failure.tlsMissing) {
        const addresses = (err as SmtpError).addresses;
        const local = addresses?.localAddress ?? via.source?.address;
        return { ...failure, tls: checkSession(null, hop, { remoteAddress: addresses?.remoteAddress, localAddress: local }, Date.now()) };
      }
      return failure;
    }
    const tls = session.tls;
    if (tls.fresh) session.tls = { ...tls, fresh: false };
    // A UTF-8 address may only go to a server that offers SMTPUTF8 (RFC 6531 §3.2). We do not downgrade: the local part has no ASCII form to fall back to.
    if ((needsSmtpUtf8(to) || needsSmtpUtf8(from)) && !session.client.extensions.has('SMTPUTF8')) {
      this.park(session);
      return {
        kind: 'unsupported',
        enhanced: '5.6.7',
        text: `5.6.7 next hop ${hop.name} does not support SMTPUTF8, which the address ${to} needs (RFC 6531)`,
        tls,
      };
    }
    try {
      const response = await session.client.send(from, to, message);
      session.sent += 1;
      const reply = replyOf(response, 'DATA');
      this.park(session, via.messagesPerConnection);
      return { ...reply, tls };
    } catch (err) {
      this.discard(session);
      return { ...failureOf(err), tls };
    }
  }

  /**
   * Closes every parked session (QUIT) and cuts those still in use (the shutdown grace period is
   * over): an open socket would keep the process alive until its command timeout. A cut send
   * never settles, so no outcome is recorded and the message stays due for the next start.
   */
  close(): void {
    this.closed = true;
    const parked = [...this.idle.values()].flat();
    this.idle.clear();
    for (const s of parked) this.discard(s, true);
    const quitting = new Set(parked.map((s) => s.client));
    for (const client of this.live) if (!quitting.has(client)) client.abandon();
  }

  /** The most recently parked usable session with the hop, if any. */
  private async take(hop: Hop, via: SendVia): Promise<Session | undefined> {
    for (;;) {
      const session = this.idle.get(key(hop, via))?.pop();
      if (!session) return undefined;
      if (session.idleTimer) clearTimeout(session.idleTimer);
      session.idleTimer = null;
      if (Date.now() - session.parkedAt < (this.options.probeAfterMs ?? PROBE_AFTER_MS)) return session;
      try {
        await session.client.reset();
        return session;
      } catch {
        this.discard(session);
      }
    }
  }

  private async open(hop: Hop, via: SendVia): Promise<Session> {
    // Under an enforced policy (MTA-STS enforce, DANE) TLS is required and the certificate is
    // checked here once the session is up (checkSession), before any MAIL FROM.
    const strict = enforced(hop.policy);
    const client = new SmtpClient({
      host: hop.address,
      port: hop.port,
      // A delivery source: the session binds to its address and greets with its name.
      name: via.source?.ehlo ?? this.options.hostname,
      localAddress: via.source?.address,
      starttls: hop.tls === 'required' || strict ? 'required' : hop.tls === 'off' ? 'ignore' : 'opportunistic',
      connectTimeoutMs: this.options.connectTimeoutMs,
      commandTimeoutMs: this.options.commandTimeoutMs,
      tls: {
        servername: isName(hop.name) ? hop.name : undefined,
        rejectUnauthorized: hop.policy ? false : this.options.tlsRejectUnauthorized,
        ...(this.contexts ? { secureContext: strict ? this.contexts.strict : this.contexts.other } : strict ? { minVersion: 'TLSv1.2' as const } : {}),
      },
    });
    this.live.add(client);
    client.onEnd = () => this.live.delete(client);
    await client.open();
    const addresses = { remoteAddress: client.remoteAddress, localAddress: client.localAddress };
    const tls = checkSession(client.secure ? (client.socket as TLSSocket) : null, hop, addresses, Date.now());
    if (strict && !tls.verified) {
      client.close();
      throw new TlsPolicyError(tls);
    }
    const session: Session = { key: key(hop, via), client, sent: 0, idleTimer: null, parkedAt: 0, tls };
    // A parked session the server closes is forgotten at once.
    client.onEnd = () => {
      this.live.delete(client);
      this.forget(session);
    };
    return session;
  }

  /** `most`: a shaping rule's messages per connection, when below the pool's own. */
  private park(session: Session, most = Infinity): void {
    if (this.closed || session.sent >= Math.min(this.options.messagesPerConnection, most)) {
      this.discard(session, true);
      return;
    }
    session.parkedAt = Date.now();
    session.idleTimer = setTimeout(() => {
      this.forget(session);
      this.discard(session, true);
    }, this.options.idleTimeoutMs);
    session.idleTimer.unref();
    const list = this.idle.get(session.key) ?? [];
    list.push(session);
    this.idle.set(session.key, list);
  }

  private forget(session: Session): void {
    if (session.idleTimer) clearTimeout(session.idleTimer);
    session.idleTimer = null;
    const list = this.idle.get(session.key);
    const at = list?.indexOf(session) ?? -1;
    if (at >= 0) list!.splice(at, 1);
    if (list?.length === 0) this.idle.delete(session.key);
  }

  private discard(session: Session, polite = false): void {
    if (session.idleTimer) clearTimeout(session.idleTimer);
    if (polite) session.client.quit();
    else session.client.close();
  }
}

/**
 * Sessions are kept per hop, per source (one from another source is another client to the
 * receiver) and per policy (one checked for nothing never carries mail that needs verified TLS).
 */
const key = (hop: Hop, via: SendVia) =>
  `${via.source ? `${via.source.name}|` : ''}${hop.address}:${hop.port}${hop.policy ? `|${hop.policy.kind === 'dane' ? 'dane' : `sts-${hop.policy.mode}`}` : ''}`;
const isName = (host: string) => /[a-z]/i.test(host) && !host.includes(':');

function replyOf(response: string | undefined, command: string): SendReply {
  const text = (response ?? '').trim();
  const code = Number(/^(\d{3})/.exec(text)?.[1] ?? 0);
  return code > 0
    ? { kind: 'reply', code, text: text.replace(/^\d{3}[ -]/, ''), command }
    : { kind: 'connection', text: text || 'empty reply', tlsMissing: false };
}

function failureOf(err: unknown): SendReply {
  const e = err as Partial<SmtpError>;
  if (e.responseCode && e.response) return replyOf(e.response, normaliseCommand(e.command ?? ''));
  return connectionFailure(err);
}

function connectionFailure(err: unknown): SendReply {
  const e = err as Partial<SmtpError>;
  // STARTTLS refused or not offered, under the "required" policy: not the recipient's fault, and
  // not a reason to bounce; the message waits for a host that can do TLS.
  if (/STARTTLS/i.test(e.command ?? '') || e.code === 'ETLS') {
    return { kind: 'connection', text: `TLS required but not available: ${e.response ?? e.message}`, tlsMissing: true };
  }
  if (e.responseCode && e.response) return replyOf(e.response, normaliseCommand(e.command ?? 'CONN'));
  const tlsMissing = /STARTTLS|TLS/i.test(e.message ?? '') && e.code !== 'ETIMEDOUT';
  return { kind: 'connection', text: `${e.code ? `${e.code}: ` : ''}${e.message ?? String(err)}`, tlsMissing };
}

/** The client names commands "RCPT TO", "MAIL FROM", "DATA", "CONN", …; keep those. */
function normaliseCommand(command: string): string {
  const upper = command.toUpperCase();
  if (upper.startsWith('RCPT')) return 'RCPT TO';
  if (upper.startsWith('MAIL')) return 'MAIL FROM';
  return upper || 'CONN';
}
