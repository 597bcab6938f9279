import type { Domains } from '../domains/domains.ts';
import type { AccountRecord, DomainRecord, MessageRecord, SandboxResult } from '../store/records.ts';
import { domainOf, isMailboxAddress } from '../util/email.ts';
import { badRequest, forbidden } from '../util/errors.ts';
import { newId } from '../util/ids.ts';
import { isPrintable } from '../util/text.ts';
import type { Clock } from '../util/time.ts';
import type { Acceptor, NewMessage, StoredBody } from './accept.ts';
import { attachmentsFor, composeBody, messageHead, type AttachmentInput, type BodyContent } from './compose.ts';
import { customHeaders, type Address } from './headers.ts';
import { newMessageId } from './message-id.ts';
import { DAY_MS } from './retention.ts';
import { checkSubstitutions, TemplateError, TemplateRefused, TemplateSet, yieldToEventLoop, type EngineFailureReport, type Rendered } from './templating.ts';
import { TemplateEngine } from './template-engine.ts';
import { finishTracking, planTracking, type TrackingPlan, type TrackingUrls } from './tracking.ts';

/** Makes the tracking URLs of a sender domain (tracking/ implements it). */
export interface TrackingLinks {
  urls(domain: DomainRecord): TrackingUrls;
}

export interface RecipientInput extends Address {
  substitutions?: Record<string, unknown> | undefined;
}

/** Who receives the mail: one message per recipient, or one conversation seen by all. */
export type Audience =
  | { kind: 'individual'; recipients: RecipientInput[]; substitutions?: Record<string, unknown> | undefined }
  | { kind: 'conversation'; to: Address[]; cc?: Address[] | undefined; bcc?: Address[] | undefined };

/** A send request of any API version, in one shape. */
export interface OutgoingMail {
  source: 'api' | 'api-v1';
  from: Address;
  replyTo?: Address | undefined;
  subject: string;
  text?: string | undefined;
  html?: string | undefined;
  amp?: string | undefined;
  attachments?: AttachmentInput[] | undefined;
  /** v2 makes an attachment inline when content_id is `<bracketed>`, v1 whenever it is set. */
  inlineRule: 'brackets' | 'any';
  /**
   * A malformed recipient address: v2 refuses the request (its response may only echo valid
   * addresses); v1 reports that recipient as failed and sends to the others.
   */
  badAddress: 'refuse' | 'report';
  headers?: Record<string, string> | undefined;
  tags?: string[] | undefined;
  sandbox?: boolean | undefined;
  sandboxResult?: SandboxResult | undefined;
  tracking?: { open?: boolean | null | undefined; click?: boolean | null | undefined } | undefined;
  retention?: { metadata?: number | null | undefined; data?: number | null | undefined } | undefined;
  schedule?: { first_attempt?: string | undefined; expires?: string | undefined } | undefined;
  audience: Audience;
}

export interface RecipientOutcome {
  recipient: RecipientInput;
  message: MessageRecord | null;
  error: string | null;
}

/** Where a request's internal failures are told (the request's logger); never the client. */
export interface FailureLog {
  warn(details: object, message: string): void;
}

export const MAX_TAGS = 10;
export const MAX_TAG_LENGTH = 64;

/**
 * Turns a send request into accepted messages: check the sender domain (owned, allowed to this
 * caller, DNS valid), check the request, render per recipient, compose, accept. Request-level
 * problems are 400/403; a recipient that cannot be sent gets an error entry of its own.
 */
export class Sender {
  constructor(
    private readonly domains: Domains,
    private readonly acceptor: Acceptor,
    private readonly clock: Clock,
    /** The MiniJinja instance templated sends render with; replaced after an internal failure. */
    readonly templates: TemplateEngine = new TemplateEngine(),
    /** Absent: mail is never tracked (opens and clicks have nowhere to go). */
    private readonly tracking?: TrackingLinks,
  ) {}

  /** `log` hears of failures inside the template engine (the client gets our generic words). */
  async send(account: AccountRecord, mail: OutgoingMail, mayUse: (domain: string) => boolean, log?: FailureLog): Promise<RecipientOutcome[]> {
    const domain = await this.senderDomain(account, mail.from, mayUse);
    const now = this.clock.now();
    if (!mail.text && !mail.html) throw badRequest('text_content or html_content is required');
    const schedule = scheduleTimes(mail.schedule, now);
    const tags = checkTags(mail.tags ?? []);
    const headers = customHeaders(mail.headers, {
      replyTo: mail.replyTo !== undefined,
      cc: mail.audience.kind === 'conversation' && mail.audience.cc !== undefined,
    });
    if (mail.replyTo && !isMailboxAddress(mail.replyTo.email)) throw badRequest('reply_to.email is not a valid email address');
    const base: Omit<BodyContent, 'subject' | 'text' | 'html' | 'amp'> = {
      from: mail.from,
      replyTo: mail.replyTo,
      attachments: attachmentsFor(mail.attachments, mail.inlineRule),
      headers,
      date: new Date(now),
    };
    const tracked = this.trackingOf(account, mail, domain);
    const batch =
      mail.audience.kind === 'individual'
        ? await this.individual(mail, mail.audience, base, domain, now, tracked, log)
        : await this.conversation(mail, mail.audience, base, domain, now, tracked);
    const accepted =
      batch.messages.length === 0
        ? []
        : await this.acceptor.accept({
            account,
            domain,
            source: mail.source,
            sender: mail.from.email,
            tags,
            sandbox: mail.sandbox ? (mail.sandboxResult ?? 'deliver') : null,
            tracking: mail.tracking,
            retention: mail.retention,
            schedule,
            bodies: batch.bodies,
            messages: batch.messages,
          });
    const byId = new Map(accepted.map((m) => [m.id, m]));
    return batch.outcomes.map((o) => ({ recipient: o.recipient, message: o.id ? byId.get(o.id)! : null, error: o.error }));
  }

  /**
   * Whether and how the mail is tracked: the request's `tracking`, else the account's defaults,
   * and only when there is HTML to track (message/tracking.ts). Null: not tracked.
   */
  private trackingOf(account: AccountRecord, mail: OutgoingMail, domain: DomainRecord): Tracked | null {
    if (!this.tracking || !mail.html) return null;
    const open = mail.tracking?.open ?? account.trackOpens;
    const click = mail.tracking?.click ?? account.trackClicks;
    if (!open && !click) return null;
    const plan = planTracking(mail.html, { open, click });
    if (!plan.open && plan.links.length === 0) return null;
    return { plan, urls: this.tracking.urls(domain) };
  }

  /** The sender's domain: the account's, usable by this caller, with valid DNS. */
  private async senderDomain(account: AccountRecord, from: Address, mayUse: (domain: string) => boolean): Promise<DomainRecord> {
    if (!isMailboxAddress(from.email)) throw badRequest('from.email is not a valid email address');
    const name = domainOf(from.email);
    const domain = await this.domains.find(account.id, name);
    if (!domain) throw badRequest(`sender domain ${name} is not a domain of this account`);
    if (!mayUse(domain.name)) throw forbidden(`this API key may not send from ${domain.name}`);
    if (!domain.dns.valid)
      throw badRequest(
        `the DNS records of sender domain ${domain.name} are not valid yet; publish them, then check them (POST …/domains/${domain.name}/check-dns, or postilion domains check ${domain.name})`,
      );
    return domain;
  }

  /** One message per recipient, To set to that recipient; templated when substitutions exist. */
  private async individual(
    mail: OutgoingMail,
    audience: Extract<Audience, { kind: 'individual' }>,
    base: Omit<BodyContent, 'subject' | 'text' | 'html' | 'amp'>,
    domain: DomainRecord,
    now: number,
    tracked: Tracked | null,
    log?: FailureLog,
  ): Promise<Batch> {
    const batch = new Batch();
    const recipients: RecipientInput[] = [];
    audience.recipients.forEach((r, i) => {
      if (isMailboxAddress(r.email)) recipients.push(r);
      else if (mail.badAddress === 'report') batch.fail(r, 'invalid email address');
      else throw badRequest(`recipients[${i}].email is not a valid email address`);
    });
    const templated = hasKeys(audience.substitutions) || audience.recipients.some((r) => hasKeys(r.substitutions));
    const content = { ...contentOf(mail), ...(tracked ? { html: tracked.plan.html } : {}) };
    if (!templated) {
      if (tracked) {
        for (const r of recipients) await batch.trackedAdd(r, domain, now, { ...base, ...content }, tracked, true);
        return batch;
      }
      const body = await batch.body({ ...base, ...content });
      for (const r of recipients) batch.add(r, domain, now, body, true);
      return batch;
    }
    try {
      checkSubstitutions(audience.substitutions ?? {});
    } catch (err) {
      throw badRequest((err as Error).message);
    }
    let templates: TemplateSet;
    try {
      const report: EngineFailureReport = (err) => log?.warn({ err }, 'the template engine was stopped or failed inside; a fresh instance replaces it');
      templates = await TemplateSet.compile(this.templates, content, { globals: audience.substitutions, report });
    } catch (err) {
      if (err instanceof TemplateError || err instanceof TemplateRefused) throw badRequest(err.message);
      throw err;
    }
    try {
      // Identical renderings (recipients without substitutions of their own) share one body.
      const shared = new Map<string, BodyRef>();
      for (const [i, r] of recipients.entries()) {
        // Each recipient's rendering is one bounded step; other requests run between steps.
        if (i > 0) await yieldToEventLoop();
        let rendered: Rendered;
        try {
          checkSubstitutions(r.substitutions ?? {});
          rendered = await templates.render(r.substitutions ?? {});
        } catch (err) {
          if (err instanceof TemplateRefused) throw badRequest(err.message);
          if (!(err instanceof TemplateError)) throw err;
          batch.fail(r, err.message);
          continue;
        }
        if (tracked) {
          await batch.trackedAdd(r, domain, now, { ...base, ...rendered }, tracked, true);
          continue;
        }
        const key = JSON.stringify(rendered);
        let body = shared.get(key);
        if (body === undefined) {
          body = await batch.body({ ...base, ...rendered });
          shared.set(key, body);
        }
        batch.add(r, domain, now, body, true);
      }
    } finally {
      templates.dispose();
    }
    return batch;
  }

  /** One body with real To/Cc headers for everyone (Bcc only on the envelope), no templating. */
  private async conversation(
    mail: OutgoingMail,
    audience: Extract<Audience, { kind: 'conversation' }>,
    base: Omit<BodyContent, 'subject' | 'text' | 'html' | 'amp'>,
    domain: DomainRecord,
    now: number,
    tracked: Tracked | null,
  ): Promise<Batch> {
    const everyone = [...audience.to, ...(audience.cc ?? []), ...(audience.bcc ?? [])];
    if (everyone.length > 50) throw badRequest('to, cc and bcc together must not exceed 50 recipients');
    for (const [field, list] of [
      ['to', audience.to],
      ['cc', audience.cc],
      ['bcc', audience.bcc],
    ] as const) {
      list?.forEach((a, i) => {
        if (!isMailboxAddress(a.email)) throw badRequest(`${field}[${i}].email is not a valid email address`);
      });
    }
    const batch = new Batch();
    const content: BodyContent = {
      ...base,
      ...contentOf(mail),
      ...(tracked ? { html: tracked.plan.html } : {}),
      to: audience.to,
      ...(audience.cc ? { cc: audience.cc } : {}),
    };
    const body = tracked ? null : await batch.body(content);
    const seen = new Set<string>();
    for (const r of everyone) {
      const address = r.email.toLowerCase();
      if (seen.has(address)) {
        batch.fail(r, 'duplicate recipient: the message is sent to this address once');
        continue;
      }
      seen.add(address);
      if (tracked) await batch.trackedAdd(r, domain, now, content, tracked, false);
      else batch.add(r, domain, now, body!, false);
    }
    return batch;
  }
}

/** Tracked mail: the request's HTML planned once, and the URLs of its sender domain. */
interface Tracked {
  plan: TrackingPlan;
  urls: TrackingUrls;
}

/** A composed body and the (rendered) subject its messages carry. */
interface BodyRef {
  id: string;
  subject: string;
}

/** The bodies, messages and per-recipient outcomes of one request, in request order. */
class Batch {
  readonly bodies: StoredBody[] = [];
  readonly messages: NewMessage[] = [];
  readonly outcomes: Array<{ recipient: RecipientInput; id: string | null; error: string | null }> = [];

  async body(content: BodyContent): Promise<BodyRef> {
    const id = newId();
    const composed = await composeBody(content, boundaryOf(id));
    this.bodies.push({ id, chunks: composed.chunks });
    return { id, subject: content.subject };
  }

  add(
    recipient: RecipientInput,
    domain: DomainRecord,
    now: number,
    body: BodyRef,
    ownTo: boolean,
    made = newMessageId(domain.name, now),
    links?: string[],
  ): void {
    const { id, header } = made;
    this.messages.push({
      id,
      messageId: header,
      recipient: recipient.email,
      head: messageHead(header, ownTo ? recipient : undefined),
      bodyId: body.id,
      subject: body.subject,
      ...(links && links.length > 0 ? { links } : {}),
    });
    this.outcomes.push({ recipient, id, error: null });
  }

  /** A tracked recipient: its own body, with its message's pixel and links. */
  async trackedAdd(recipient: RecipientInput, domain: DomainRecord, now: number, content: BodyContent, tracked: Tracked, ownTo: boolean): Promise<void> {
    const made = newMessageId(domain.name, now);
    const html = content.html === undefined ? undefined : finishTracking(content.html, made.id, tracked.urls);
    const body = await this.body({ ...content, html });
    this.add(recipient, domain, now, body, ownTo, made, tracked.plan.links);
  }

  fail(recipient: RecipientInput, error: string): void {
    this.outcomes.push({ recipient, id: null, error });
  }
}

function contentOf(mail: OutgoingMail): { subject: string; text?: string | undefined; html?: string | undefined; amp?: string | undefined } {
  return { subject: mail.subject, text: mail.text || undefined, html: mail.html || undefined, amp: mail.amp || undefined };
}

function hasKeys(value: Record<string, unknown> | undefined): boolean {
  return value !== undefined && value !== null && Object.keys(value).length > 0;
}

/** Checks a schedule against the limits: first attempt within 7 days, expiry within 8, both ahead. */
export function scheduleTimes(schedule: OutgoingMail['schedule'], now: number): { firstAttempt?: number; expires?: number } | undefined {
  if (!schedule) return undefined;
  const out: { firstAttempt?: number; expires?: number } = {};
  if (schedule.first_attempt !== undefined) {
    const at = Date.parse(schedule.first_attempt);
    if (Number.isNaN(at)) throw badRequest('invalid schedule.first_attempt, provide a valid RFC3339 time string');
    if (at <= now) throw badRequest('schedule.first_attempt must be in the future');
    if (at > now + 7 * DAY_MS) throw badRequest('schedule.first_attempt must be within 7 days of the request');
    out.firstAttempt = at;
  }
  if (schedule.expires !== undefined) {
    const at = Date.parse(schedule.expires);
    if (Number.isNaN(at)) throw badRequest('invalid schedule.expires, provide a valid RFC3339 time string');
    if (at <= now) throw badRequest('schedule.expires must be in the future');
    if (at > now + 8 * DAY_MS) throw badRequest('schedule.expires must be within 8 days of the request');
    if (out.firstAttempt !== undefined && at <= out.firstAttempt) throw badRequest('schedule.expires must be after schedule.first_attempt');
    out.expires = at;
  }
  return out;
}

/** At most 10 tags of 1..64 printable characters; duplicates collapse. */
export function checkTags(tags: string[]): string[] {
  const unique = [...new Set(tags)];
  if (unique.length > MAX_TAGS) throw badRequest(`at most ${MAX_TAGS} tags are allowed`);
  for (const tag of unique) {
    if (tag.length === 0 || tag.length > MAX_TAG_LENGTH || !isPrintable(tag) || tag.includes(',')) {
      throw badRequest(`tag "${tag.slice(0, 80)}" must be 1 to ${MAX_TAG_LENGTH} printable characters without commas`);
    }
  }
  return unique;
}

/** The random tail of a UUIDv7 body id: unique per body, so no fresh randomness per MIME part. */
function boundaryOf(bodyId: string): string {
  return bodyId.slice(-17).replace('-', '');
}
