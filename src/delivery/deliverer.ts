import { classify, enhancedCodeOf, type BounceRule, type Classification, type Outcome } from '../bounce/rules.ts';
import { DnsUnavailableError } from '../domains/resolver.ts';
import type { DkimSigner } from '../domains/signer.ts';
import type { DomainsRepo } from '../store/domains-repo.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { DomainRecord, MessageRecord } from '../store/records.ts';
import type { Clock } from '../util/time.ts';
import { domainOf } from '../util/email.ts';
import { retryHintMs } from '../bounce/retry-hint.ts';
import { BodyDigests } from './body-digests.ts';
import { RecentBodies } from './recent-bodies.ts';
import type { Hop, Router } from './router.ts';
import type { SendReply, SmtpPool } from './smtp-pool.ts';
import type { TlsOutcome, TlsReportSink } from './tls-outcome.ts';
import type { SessionTls } from './tls-policy/session-tls.ts';
import type { TlsPlan, TlsPolicies } from './tls-policy/tls-policies.ts';
import type { Source } from './sources/sources.ts';
import { isIP } from 'node:net';

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

/** What delivery does about TLS besides sending: the receivers' policies, reporting, counting. */
export interface DelivererOptions {
  /** The receiving domains' TLS policies (MTA-STS, DANE); absent: every hop as configured (delivery.tls). */
  tlsPolicies?: TlsPolicies | undefined;
  /** Where each session's TLS result goes (TLS reporting, RFC 8460). */
  tlsReports?: TlsReportSink | undefined;
  /** Told each attempt's TLS outcome (the metrics). */
  onTls?: ((outcome: TlsOutcome) => void) | undefined;
  /** Traffic shaping: the messages one connection to an MX host carries at most, when its provider says. */
  shaping?: { messagesPerConnection(host: string): number | undefined } | undefined;
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
    private readonly options: DelivererOptions = {},
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
    const recipientDomain = domainOf(message.recipient);
    const found = await this.router.hops(recipientDomain);
    if (!Array.isArray(found)) return internal(found.permanent ? 'bounced' : 'deferred', found.classification, found.text);
    const reachable = source ? reachableFrom(found, source) : found;
    if (reachable.length === 0)
      return internal('deferred', 'BadConnection', `no host of ${recipientDomain} has an IPv${source!.family} address to reach from source ${source!.name}`);
    const plan = await this.plan(recipientDomain, reachable);
    if (!('hops' in plan)) return plan;
    const route = plan.hops;

    let content: Buffer[];
    try {
      content = await this.signed(message, domain);
    } catch (err) {
      return internal('deferred', 'Uncategorized', `could not prepare the message: ${(err as Error).message}`);
    }
    // A DSN of ours goes out with the null return path, so that nothing answers it (RFC 5321 §4.5.5).
    const from = message.isBounceNotification ? '' : returnPath(message, domain, this.verpToken);
    let last: { reply: SendReply; host: string } | null = null;
    let tls: TlsOutcome | undefined;
    for (const hop of route) {
      const reply = await this.pool.send(hop, from, message.recipient, content, {
        ...(source ? { source } : {}),
        messagesPerConnection: this.options.shaping?.messagesPerConnection(hop.name),
      });
      last = { reply, host: hop.name };
      if (reply.tls) {
        tls = tlsOutcome(hop, reply.tls);
        this.report(recipientDomain, hop, reply.tls, plan);
      }
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
          ...this.counted(tls),
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
        ...this.counted(tls),
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
        ...this.counted(tls),
      };
    }
    const classification: Classification =
      reply.kind === 'connection' && reply.tlsMissing ? 'PolicyRelated' : /ETIMEDOUT|timeout/i.test(reply.text) ? 'NoAnswerFromHost' : 'BadConnection';
    return { ...internal('deferred', classification, reply.text), host: last!.host, ...this.counted(tls) };
  }

  /**
   * The hops under the receiving domain's TLS policies, or the deferral when the policies leave
   * none: never a fallback to a host the policy does not list, nor to clear text.
   */
  private async plan(domain: string, hops: Hop[]): Promise<TlsPlan | Attempt> {
    const policies = this.options.tlsPolicies;
    if (!policies?.active) return { hops, refused: [], unavailable: null };
    let plan: TlsPlan;
    try {
      plan = await policies.plan(domain, hops);
    } catch (err) {
      if (err instanceof DnsUnavailableError) return internal('deferred', 'DNSFailure', `${domain}: ${err.message} (DNSSEC check of its MX)`);
      throw err;
    }
    for (const r of plan.refused) {
      this.options.tlsReports?.record({
        ...r.report,
        receivingMxHostname: r.hop.name,
        receivingIp: r.hop.address,
        sendingMtaIp: null,
        success: false,
        failure: { type: r.failure, detail: r.detail },
      });
    }
    if (plan.hops.length > 0) return plan;
    const why = [...new Set(plan.refused.map((r) => r.detail))].join('; ');
    return {
      ...internal('deferred', 'PolicyRelated', `TLS policy of ${domain} leaves no MX host to deliver to: ${why}`),
      host: plan.refused[0]?.hop.name ?? null,
    };
  }

  /** One session's result for TLS reporting: a session counts once, however many messages it carries. */
  private report(domain: string, hop: Hop, tls: SessionTls, plan: TlsPlan): void {
    const sink = this.options.tlsReports;
    // TLS switched off and no policy: nothing was tried, nothing to report.
    if (!sink || !tls.fresh || (!hop.policy && hop.tls === 'off')) return;
    const policy = hop.policy?.report ?? { policyDomain: domain, policyType: 'no-policy-found' as const, policyStrings: [] };
    const announced = !hop.policy && plan.unavailable;
    const failure = announced
      ? { type: plan.unavailable!.failure, detail: plan.unavailable!.detail }
      : hop.policy
        ? tls.failure
        : tls.version
          ? undefined
          : tls.failure;
    sink.record({
      ...policy,
      ...(announced ? { policyType: 'sts' as const } : {}),
      receivingMxHostname: hop.name,
      receivingIp: tls.remoteAddress ?? hop.address,
      // The session's local address: the bound source's when there is one, else the one the kernel picked.
      sendingMtaIp: tls.localAddress,
      success: failure === undefined,
      ...(failure ? { failure } : {}),
    });
  }

  /** The attempt's TLS outcome, counted once (the metrics). */
  private counted(tls: TlsOutcome | undefined): { tls?: TlsOutcome } {
    if (!tls) return {};
    this.options.onTls?.(tls);
    return { tls };
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

/** The TLS a session had, under the policy of its hop: DANE, MTA-STS, else opportunistic (none when TLS is off). */
export function tlsOutcome(hop: Hop, tls: SessionTls): TlsOutcome {
  const policy = hop.policy;
  if (policy?.kind === 'dane') return { policy: 'dane', version: tls.version, verified: tls.verified };
  if (policy?.kind === 'mta-sts') return { policy: 'mta-sts', mode: policy.mode, version: tls.version, verified: tls.verified && policy.listed };
  return { policy: hop.tls === 'off' ? 'none' : 'opportunistic', version: tls.version, verified: tls.verified };
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
