import EmailReplyParser from 'email-reply-parser';
import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';
import { chunksStream } from '../util/chunks-stream.ts';
import { JsonBytes, jsonParts } from '../util/json-parts.ts';

/** What a route asks to be sent (reference-api §6). */
export interface RouteOptions {
  id: string;
  attachments: boolean;
  headers: boolean;
  groupByMessageId: boolean;
  stripReplies: boolean;
}

export interface RouteMessage {
  /** The inbound message's id. */
  id: string;
  /** Its size in bytes as received. */
  size: number;
  /** When it was received (RFC 3339, nanoseconds added). */
  receivedAt: string;
  /** The recipients this POST is for: the one matched, or all of them when the route groups. */
  recipients: string[];
  spamScore: number;
  /** `smtp.inbound.dmarc_policy: enforce` found it failing its sender's `p=quarantine` (or a sampled-out `p=reject`). */
  quarantine?: boolean;
}

/** Text of a plain body looked at for the quoted reply: past this the rest is kept as it is. */
const REPLY_PARSE_LIMIT = 256 * 1024;
/** Attachment bytes base64-encoded at a time (a multiple of 3: only the last slice is padded). */
const BASE64_SLICE = 3 * 256 * 1024;
const QUOTE = Buffer.from('"');

/** An inbound message, read from its stored chunks (never joined), as a route POST needs it. */
export function parseRouted(raw: readonly Buffer[]): Promise<ParsedMail> {
  return simpleParser(chunksStream(raw), { skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true, maxHtmlLengthToParse: 10 * 1024 * 1024 });
}

/**
 * The `message.routing` payload of one route POST: every `data` key always present (empty
 * strings, 0, false or [] when blank), attachments (inline parts and filename-bearing parts
 * included) only with the route's `attachments`, the header map only with its `headers`.
 *
 * The JSON comes as a list of buffers, the bytes `JSON.stringify` would make: a payload can be
 * tens of MB, and is neither made into one string nor copied into one buffer; attachments are
 * base64-encoded straight into buffers.
 */
export function routePayload(mail: ParsedMail, route: RouteOptions, m: RouteMessage, authenticationResults: string | null): Buffer[] {
  const plain = mail.text ?? '';
  const data: Record<string, unknown> = {
    id: m.id,
    from: headerText(mail, 'from'),
    reply_to: headerText(mail, 'reply-to'),
    to: route.groupByMessageId ? headerText(mail, 'to') || m.recipients.join(', ') : (m.recipients[0] ?? ''),
    subject: mail.subject ?? '',
    message_id: mail.messageId ?? '',
    size: m.size,
    spam_score: m.spamScore,
    bounce: isBounce(mail),
    cc: headerText(mail, 'cc'),
    date: headerText(mail, 'date'),
    in_reply_to: mail.inReplyTo ?? '',
    references: Array.isArray(mail.references) ? mail.references.join(' ') : (mail.references ?? ''),
    auto_submitted: headerText(mail, 'auto-submitted'),
    html_body: typeof mail.html === 'string' ? mail.html : '',
    plain_body: plain,
    reply_from_plain_body: route.stripReplies ? stripReply(plain) : '',
  };
  // Only when set: the reference's payload has no such key, and its consumers see it only on mail to put aside.
  if (m.quarantine) data.quarantine = true;
  if (route.attachments) {
    data.attachments = mail.attachments.map((a) => ({
      filename: a.filename ?? '',
      content_type: a.contentType,
      content_id: contentId(a.contentId),
      disposition: (a.contentDisposition ?? '').toLowerCase(),
      data: base64Json(a.content),
    }));
  } else data.attachments = [];
  if (route.headers) {
    const headers: Record<string, string> = {};
    for (const line of mail.headerLines) {
      const name = line.line.slice(0, line.line.indexOf(':')).trim();
      const value = line.line
        .slice(line.line.indexOf(':') + 1)
        .replace(/\r?\n[ \t]+/g, ' ')
        .trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    if (authenticationResults !== null) headers['Authentication-Results'] = authenticationResults;
    data.headers = headers;
  }
  return jsonParts({ type: 'message.routing', route_id: route.id, timestamp: m.receivedAt, data });
}

/** The base64 of `content` as a JSON string, a slice at a time. */
function base64Json(content: Buffer): JsonBytes {
  const parts = [QUOTE];
  for (let at = 0; at < content.length; at += BASE64_SLICE)
    parts.push(Buffer.from(content.toString('base64', at, Math.min(at + BASE64_SLICE, content.length)), 'latin1'));
  parts.push(QUOTE);
  return new JsonBytes(parts);
}

/** A header as sent (decoded), `""` when absent. */
function headerText(mail: ParsedMail, name: string): string {
  const value: unknown = mail.headers.get(name);
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (value instanceof Date) {
    const line = mail.headerLines.find((l) => l.key === name);
    return line ? line.line.slice(line.line.indexOf(':') + 1).trim() : value.toUTCString();
  }
  if (isAddress(value)) {
    // `Name <address>` as the spec's examples write it (mailparser's text quotes every name).
    const list = (Array.isArray(value) ? value : [value]).flatMap((a) => a.value);
    return list.map((a) => (a.name ? `${a.name} <${a.address ?? ''}>` : (a.address ?? ''))).join(', ');
  }
  if (typeof value === 'object' && 'value' in value) return String(value.value);
  // What is left of mailparser's values: strings, numbers, lists of strings (joined with commas).
  const rest = value as string | number | string[];
  return String(rest);
}

function isAddress(value: unknown): value is AddressObject | AddressObject[] {
  const first: unknown = Array.isArray(value) ? value[0] : value;
  return typeof first === 'object' && first !== null && 'text' in first && 'value' in first;
}

/** A delivery report or a message from a mailer daemon. */
function isBounce(mail: ParsedMail): boolean {
  const type = mail.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  if (type?.value === 'multipart/report' && type.params?.['report-type']?.toLowerCase() === 'delivery-status') return true;
  const from = headerText(mail, 'from').toLowerCase();
  return /mailer-daemon@|postmaster@/.test(from);
}

function contentId(id: string | undefined): string {
  if (!id) return '';
  const bare = id.replace(/^<|>$/g, '');
  try {
    return decodeURIComponent(bare);
  } catch {
    return bare;
  }
}

/** The text of the reply, without the quoted message and signature below it. */
export function stripReply(plain: string): string {
  if (plain === '') return '';
  const head = plain.slice(0, REPLY_PARSE_LIMIT);
  try {
    return new EmailReplyParser().parseReply(head).trim();
  } catch {
    return head.trim();
  }
}
