import type { AccountRecord, DomainRecord, MessageRecord } from '../store/records.ts';
import type { Domains } from '../domains/domains.ts';
import { BODY_CHUNK_BYTES } from '../store/messages-repo.ts';
import { domainOf, isUtf8MailboxAddress } from '../util/email.ts';
import { AppError, badRequest, forbidden } from '../util/errors.ts';
import { newId } from '../util/ids.ts';
import type { Clock } from '../util/time.ts';
import type { Acceptor, NewMessage, StoredBody } from './accept.ts';
import { headerFromAddresses, MAX_FROM_ADDRESSES } from './header-from.ts';
import { newMessageId } from './message-id.ts';
import { prepareSubmitted, type SubmittedOptions } from './submitted.ts';
import type { SpooledMessage, DataSpool } from './spool.ts';
import { rfc5322Date } from '../bounce/dsn.ts';
import { rewriteHtmlParts } from './mime-html.ts';
import type { TrackingLinks } from './send.ts';
import { finishTracking, planTracking } from './tracking.ts';

/** Who relays: the credential's account, its domains (null: every domain), sandbox or not. */
/** The submitting client, for the Received trace field. */
export interface RelayClient {
  helo: string;
  address: string;
  tls: boolean;
}

export interface Relayer {
  account: AccountRecord;
  /** Domain names the credential may send from; null for a global credential. */
  domains: readonly string[] | null;
  sandbox: boolean;
}

/**
 * Mail relayed over SMTP: the envelope sender's domain is checked like an API sender's, the
 * message is stored once (special headers applied and stripped, Message-ID and Date added when
 * missing) and accepted as one message per envelope recipient through the same accept().
 */
export class Relay {
  constructor(
    private readonly domains: Domains,
    private readonly acceptor: Acceptor,
    private readonly clock: Clock,
    private readonly hostname: string,
    /** A spool for one message's DATA (large messages are written to the store as they arrive). */
    readonly newSpool: () => DataSpool,
    /** Absent: mail is never tracked. */
    private readonly tracking?: TrackingLinks,
  ) {}

  /** The sender domain for MAIL FROM: the account's, allowed to the credential, DNS valid. */
  async senderDomain(relayer: Relayer, from: string): Promise<DomainRecord> {
    // An SMTPUTF8 sender may have a UTF-8 local part; its domain (A-labels) must be one of the account's.
    if (!isUtf8MailboxAddress(from)) throw badRequest(`${printable(from)} is not a valid sender address`);
    const name = domainOf(from);
    const domain = await this.domains.find(relayer.account.id, name);
    if (!domain) throw forbidden(`sender domain ${name} is not a domain of this account`);
    if (relayer.domains !== null && !relayer.domains.includes(domain.name)) throw forbidden(`this credential may not send from ${domain.name}`);
    if (!domain.dns.valid) throw forbidden(`the DNS records of sender domain ${domain.name} are not valid yet; publish them and check again`);
    return domain;
  }

  /**
   * The domain of the message's header From when the credential may send from it (as for MAIL
   * FROM), so that what Postilion signs aligns for DMARC; null when the message has no single
   * From field (accept() refuses it). Every address of the field must be at that one domain.
   * Throws a 403 AppError naming the address otherwise. `envelope`: the MAIL FROM domain, found
   * for this credential already, so an address at it needs no second look-up.
   */
  async headerFromDomain(relayer: Relayer, head: Buffer, envelope: DomainRecord | null = null): Promise<DomainRecord | null> {
    const addresses = headerFromAddresses(head);
    if (addresses === null) return null;
    if (addresses.length === 0) throw forbidden('the From header names no address');
    if (addresses.length > MAX_FROM_ADDRESSES) throw forbidden(`the From header names more than ${MAX_FROM_ADDRESSES} addresses`);
    let found: DomainRecord | null = null;
    for (const { address, valid } of addresses) {
      if (!valid) throw forbidden(`the From header address ${printable(address)} is not a valid address`);
      let domain: DomainRecord;
      // At the MAIL FROM domain (as a rule): already found to be one the credential may send from.
      if (envelope && domainOf(address) === envelope.name && isUtf8MailboxAddress(address)) {
        if (found && found.id !== envelope.id) throw forbidden('the From header names addresses at more than one domain');
        found = envelope;
        continue;
      }
      try {
        domain = await this.senderDomain(relayer, address);
      } catch (err) {
        if (!isClientError(err)) throw err;
        throw forbidden(`the From header must be at a domain this credential may send from: ${err.message}`);
      }
      if (found && found.id !== domain.id) throw forbidden('the From header names addresses at more than one domain');
      found = domain;
    }
    return found;
  }

  /**
   * Accepts the DATA of one transaction, whole (`raw`) or written as it arrived (a large message:
   * its header block is prepared here and its body chunks are already in the store); resolves
   * once it is durably stored.
   */
  async accept(
    relayer: Relayer,
    domain: DomainRecord,
    from: string,
    recipients: string[],
    input: Buffer | SpooledMessage,
    client: RelayClient,
  ): Promise<MessageRecord[]> {
    const spooled = Buffer.isBuffer(input) ? null : input;
    const raw = spooled ? spooled.head : (input as Buffer);
    const now = this.clock.now();
    const first = newMessageId(domain.name, now);
    const helo = client.helo.replace(/[^A-Za-z0-9.:[\]-]/g, '').slice(0, 255) || 'unknown';
    const received = `Received: from ${helo} ([${client.address.replace(/^::ffff:/, '')}])\r\n\tby ${this.hostname} (Postilion) with ${client.tls ? 'ESMTPSA' : 'ESMTPA'} id ${first.id};\r\n\t${rfc5322Date(new Date(now))}`;
    const prepared = prepareSubmitted(raw, first.header, now, received);
    const o = prepared.options;
    const bodyId = spooled?.bodyId ?? newId();
    const chunks: Buffer[] = [];
    if (spooled) chunks.push(prepared.message, ...spooled.tail);
    else chunks.push(...chunked(prepared.message));
    const ids = recipients.map((_, i) => (i === 0 ? first.id : newMessageId(domain.name, now).id));
    const bodies: StoredBody[] = [{ id: bodyId, chunks, spooled: spooled?.written }];
    const tracked = spooled ? [] : this.tracked(relayer.account, domain, o, prepared.message, ids);
    const messages: NewMessage[] = recipients.map((recipient, i) => {
      const own = tracked[i];
      if (own) bodies.push({ id: own.bodyId, chunks: chunked(own.message) });
      return {
        id: ids[i]!,
        messageId: prepared.messageId,
        recipient,
        // The whole message, headers included, is the shared body: SMTP mail keeps its own To.
        head: '',
        bodyId: own?.bodyId ?? bodyId,
        subject: prepared.subject,
        ...(own && own.links.length > 0 ? { links: own.links } : {}),
      };
    });
    // A body every recipient replaced with its own tracked copy is not stored.
    if (tracked.length > 0 && tracked.every((t) => t !== null)) bodies.shift();
    const sandbox = relayer.sandbox || o.sandbox === true;
    return this.acceptor.accept({
      account: relayer.account,
      domain,
      source: 'smtp',
      sender: from,
      tags: o.tags ?? [],
      sandbox: sandbox ? (o.sandboxResult ?? 'deliver') : null,
      tracking: { open: o.trackOpens, click: o.trackClicks },
      retention: { metadata: o.metadataRetention, data: o.dataRetention },
      bodies,
      messages,
    });
  }

  /**
   * Per recipient, its own copy of a tracked message (HTML parts rewritten with its message's
   * pixel and links; message/tracking.ts), or null for one that keeps the shared body. The
   * ahasend-track-* headers override the account's defaults. A message spooled while it was
   * received (over 1 MiB) is not tracked: it is not all in memory to rewrite.
   */
  private tracked(
    account: AccountRecord,
    domain: DomainRecord,
    o: SubmittedOptions,
    message: Buffer,
    ids: string[],
  ): Array<{ bodyId: string; message: Buffer; links: string[] } | null> {
    const open = o.trackOpens ?? account.trackOpens;
    const click = o.trackClicks ?? account.trackClicks;
    if (!this.tracking || (!open && !click)) return [];
    const urls = this.tracking.urls(domain);
    return ids.map((id) => {
      const links: string[] = [];
      let pixel = open;
      const rewritten = rewriteHtmlParts(message, (html) => {
        // One pixel, in the first HTML part.
        const plan = planTracking(html, { open: pixel, click }, links.length);
        pixel = false;
        links.push(...plan.links);
        return finishTracking(plan.html, id, urls);
      });
      return rewritten ? { bodyId: newId(), message: rewritten, links } : null;
    });
  }
}

function chunked(message: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < message.length; at += BODY_CHUNK_BYTES) out.push(message.subarray(at, at + BODY_CHUNK_BYTES));
  return out;
}

/** Whether an error is one to answer the client with (its text is meant for it). */
export function isClientError(err: unknown): err is AppError {
  return err instanceof AppError && err.status < 500;
}

function printable(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?').slice(0, 80);
}
