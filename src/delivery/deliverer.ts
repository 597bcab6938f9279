import { classify, enhancedCodeOf, type BounceRule, type Classification, type Outcome } from '../bounce/rules.ts';
import type { DkimSigner } from '../domains/signer.ts';
import type { DomainsRepo } from '../store/domains-repo.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { DomainRecord, MessageRecord } from '../store/records.ts';
import type { Clock } from '../util/time.ts';
import { domainOf } from '../util/email.ts';
import { retryHintMs } from '../bounce/retry-hint.ts';
import { BodyDigests } from './body-digests.ts';
import { RecentBodies } from './recent-bodies.ts';
import type { Router } from './router.ts';
import type { SendReply, SmtpPool } from './smtp-pool.ts';
import type { Source } from './sources/sources.ts';
import { isIP } from 'node:net';
import type { TlsOutcome } from './tls-outcome.ts';

/** What one delivery attempt of one message came to. */
export interface Attempt {
  outcome: Outcome;
  classification?: Classification | undefined;
  /** 0 when no SMTP reply was had (DNS, connection, internal). */
  smtpCode: number;
  enhanced: string;
  response: string;
  command: string;
  /** The wait the server asked for, if it named one. */
  hintMs?: number | undefined;
  /** The MX host that answered, or the last one tried. */
  host: string | null;
  /** The delivery source (delivery.sources) the attempt went out from; absent when none is configured. */
  source?: string | undefined;
  /** The TLS the session had and the policy that governed it; absent when no session was had. */
  tls?: TlsOutcome | undefined;
}

/**
 * Delivers one message: finds its hops, signs it with its domain's active DKIM key(s), sends it
 * with the VERP return path over a pooled session, and says what the reply means.
 */
export class Deliverer {
  private readonly bodies: RecentBodies;

  constructor(
    private readonly messages: MessagesRepo,
    private readonly domains: DomainsRepo,
    private readonly signer: DkimSigner,
    private readonly router: Router,
    private readonly pool: SmtpPool,
    private readonly rules: readonly BounceRule[],
    clock: Clock,
    /** The VERP token of a message's return path (util/verp.ts). */
    private readonly verpToken: (messageId: string) => string,
    /** What signing needs of each body, kept so that a body is hashed once for all its sends. */
    private readonly digests = new BodyDigests(),
  ) {
    this.bodies = new RecentBodies(
      (bodyId) => this.messages.body(bodyId),
      undefined,
      () => clock.now(),
    );
  }

  /**
   * Bodies just accepted, with the sends due now that will ask for them: their first delivery
   * need not read them back from the store.
   */
  remember(bodies: ReadonlyArray<{ id: string; chunks: Buffer[]; spooled?: number | undefined }>, sends: ReadonlyMap<string, number>): void {
    for (const body of bodies) {
      // A large body written as it arrived is not all in memory: delivery reads it from the store.
      if (body.spooled) continue;
      const count = sends.get(body.id) ?? 0;
      if (count > 0) this.bodies.put(body.id, body.chunks, count);
    }
  }

  /** A message of the body has been dealt with (sent or not): one announced send is done. */
  done(bodyId: string): void {
    this.bodies.release(bodyId);
  }

  /** One attempt; with `source` (delivery.sources), from its address and EHLO name, and named in the attempt. */
  async attempt(message: MessageRecord, source?: Source): Promise<Attempt> {
    const attempt = await this.attemptFrom(message, source);
    return source ? { ...attempt, source: source.name } : attempt;
  }

  private async attemptFrom(message: MessageRecord, source: Source | undefined): Promise<Attempt> {
    const domain = await this.domains.get(message.domainId);
    if (!domain) return internal('bounced', 'InvalidSender', `sender domain ${message.domain} no longer exists`);
    const found = await this.router.hops(domainOf(message.recipient));
    if (!Array.isArray(found)) return internal(found.permanent ? 'bounced' : 'deferred', found.classification, found.text);
    const route = source ? reachableFrom(found, source) : found;
    if (route.length === 0)
      return internal(
        'deferred',
        'BadConnection',
        `no host of ${domainOf(message.recipient)} has an IPv${source!.family} address to reach from source ${source!.name}`,
      );

    let content: Buffer[];
    try {
      content = await this.signed(message, domain);
    } catch (err) {
      return internal('deferred', 'Uncategorized', `could not prepare the message: ${(err as Error).message}`);
    }
    // A DSN of ours goes out with the null return path, so that nothing answers it (RFC 5321 §4.5.5).
    const from = message.isBounceNotification ? '' : returnPath(message, domain, this.verpToken);
    let last: { reply: SendReply; host: string } | null = null;
    for (const hop of route) {
      const reply = await this.pool.send(hop, from, message.recipient, content, source ? { source } : {});
      last = { reply, host: hop.name };
      if (reply.kind === 'unsupported') {
        // Permanent: another MX host of the same domain is run by the same operator, as a rule.
        return {
          outcome: 'bounced',
          classification: 'ProtocolErrors',
          smtpCode: 0,
          enhanced: reply.enhanced,
          response: reply.text,
          command: 'MAIL FROM',
          host: hop.name,
        };
      }
      if (reply.kind === 'connection') {
        // A source whose address this host does not have fails on our side: the host is not to blame.
        if (!reply.tlsMissing && !(source && /EADDRNOTAVAIL/.test(reply.text))) this.router.markUnreachable(hop);
        continue;
      }
      // A host that turns us away before the envelope (421 greeting): try the next one.
      if (reply.code >= 400 && reply.code < 500 && (reply.command === 'CONN' || reply.command === 'EHLO')) continue;
      const enhanced = enhancedCodeOf(reply.text);
      const verdict = classify({ code: reply.code, enhanced, text: reply.text }, this.rules);
      return {
        outcome: verdict.outcome,
        classification: verdict.classification,
        smtpCode: reply.code,
        enhanced,
        response: `${reply.code} ${reply.text}`,
        command: reply.command,
        hintMs: verdict.outcome === 'deferred' ? retryHintMs(reply.text) : undefined,
        host: hop.name,
      };
    }
    const reply = last!.reply;
    if (reply.kind === 'reply') {
      return {
        outcome: 'deferred',
        classification: 'TransientFailure',
        smtpCode: reply.code,
        enhanced: enhancedCodeOf(reply.text),
        response: `${reply.code} ${reply.text}`,
        command: reply.command,
        host: last!.host,
      };
    }
    const classification: Classification =
      reply.kind === 'connection' && reply.tlsMissing ? 'PolicyRelated' : /ETIMEDOUT|timeout/i.test(reply.text) ? 'NoAnswerFromHost' : 'BadConnection';
    return { ...internal('deferred', classification, reply.text), host: last!.host };
  }

  /**
   * The message as it is sent, in parts never joined: the DKIM-Signature(s) with the per-message
   * headers (one small buffer: each part is a write to the socket), then the shared body's chunks
   * as they are kept or read. The body's hash comes from its digest, made once per body.
   */
  private async signed(message: MessageRecord, domain: DomainRecord): Promise<Buffer[]> {
    const body = await this.bodies.parts(message.bodyId);
    const { header, bodyHash } = this.digests.view(message.bodyId, Buffer.from(message.head, 'utf8'), body);
    const signature = await this.signer.signHeader(domain.name, header, bodyHash);
    return [Buffer.from(signature + message.head, 'utf8'), ...body];
  }
}

/**
 * Whether the message is one of its body's sends announced at acceptance (Deliverer.remember):
 * due at once, not sandbox, never attempted. Only those let the body's hold go when dealt with;
 * a retry, or mail scheduled for later, was never counted.
 */
export function announcedSend(message: MessageRecord): boolean {
  return !message.sandbox && message.attempts.length === 0 && Date.parse(message.dueAt) <= Date.parse(message.createdAt);
}

/** VERP return path: bounces+<message token>@<return-path subdomain>.<domain>. */
export function returnPath(message: MessageRecord, domain: DomainRecord, token: (messageId: string) => string): string {
  return `bounces+${token(message.id)}@${domain.returnPathSubdomain}.${domain.name}`;
}

/** The hops a source can reach: those of its address family (a host given by name is left to the connection). */
function reachableFrom<H extends { address: string }>(hops: H[], source: Source): H[] {
  return hops.filter((hop) => {
    const family = isIP(hop.address);
    return family === 0 || family === source.family;
  });
}

function internal(outcome: Outcome, classification: Classification, text: string): Attempt {
  return { outcome, classification, smtpCode: 0, enhanced: '', response: text, command: '', host: null };
}
