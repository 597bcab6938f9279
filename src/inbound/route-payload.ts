import EmailReplyParser from 'email-reply-parser';
import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';

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
}

/** Text of a plain body looked at for the quoted reply: past this the rest is kept as it is. */
const REPLY_PARSE_LIMIT = 256 * 1024;

/**
 * The `message.routing` payload of one route POST: every `data` key always present (empty
 * strings, 0, false or [] when blank), attachments (inline parts and filename-bearing parts
 * included) only with the route's `attachments`, the header map only with its `headers`.
 */
export async function routePayload(raw: Buffer, route: RouteOptions, m: RouteMessage, authenticationResults: string | null): Promise<string> {
  const mail = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true, maxHtmlLengthToParse: 10 * 1024 * 1024 });
  const plain = mail.text ?? '';
  const data: Record<string, unknown> = {
    id: m.id,
    from: headerText(mail, 'from'),
    reply_to: headerText(mail, 'reply-to'),
    to: route.groupByMessageId ? headerText(mail, 'to') || m.recipients.join(', ') : m.recipients[0] ?? '',
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
  if (route.attachments) {
    data.attachments = mail.attachments.map((a) => ({
      filename: a.filename ?? '',
      content_type: a.contentType,
      content_id: contentId(a.contentId),
      disposition: (a.contentDisposition ?? '').toLowerCase(),
      data: a.content.toString('base64'),
    }));
  } else data.attachments = [];
  if (route.headers) {
    const headers: Record<string, string> = {};
    for (const line of mail.headerLines) {
      const name = line.line.slice(0, line.line.indexOf(':')).trim();
      const value = line.line.slice(line.line.indexOf(':') + 1).replace(/\r?\n[ \t]+/g, ' ').trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    if (authenticationResults !== null) headers['Authentication-Results'] = authenticationResults;
    data.headers = headers;
  }
  return JSON.stringify({ type: 'message.routing', route_id: route.id, timestamp: m.receivedAt, data });
}

/** A header as sent (decoded), `""` when absent. */
function headerText(mail: ParsedMail, name: string): string {
  const value = mail.headers.get(name);
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
  if (typeof value === 'object' && 'value' in value) return String((value as { value: unknown }).value);
  return String(value);
}

function isAddress(value: unknown): value is AddressObject | AddressObject[] {
  const first = Array.isArray(value) ? value[0] : value;
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
