import { encodeWords, foldLines, quoteString } from 'nodemailer/lib/mime-funcs';
import { badRequest } from '../util/errors.ts';

export interface Address {
  email: string;
  name?: string | undefined;
}

/** A header name: visible ASCII without space or colon (RFC 5322 ftext). */
const HEADER_NAME = /^[\x21-\x39\x3b-\x7e]{1,76}$/;
/** A header value: visible ASCII, space and tab; no CR/LF that could start a header of its own. */
const HEADER_VALUE = /^[\t\x20-\x7e]{0,998}$/;

/** Headers the composer writes from the request's own fields: setting them as headers is a 400. */
const OWNED = new Set(['from', 'to', 'bcc', 'subject', 'date', 'mime-version', 'content-type', 'content-transfer-encoding', 'return-path', 'dkim-signature']);

/**
 * Checks an application's custom headers: names and values of visible ASCII, no headers the
 * composer owns, `reply-to` / `cc` only when the matching field is not used; `message-id` is
 * dropped (Postilion always generates it). Returns them in request order.
 */
export function customHeaders(headers: Record<string, string> | undefined, fields: { replyTo: boolean; cc: boolean }): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const seen = new Set<string>();
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!HEADER_NAME.test(name)) throw badRequest(`headers: invalid header name "${printable(name)}" (visible ASCII without spaces or colons)`);
    if (typeof value !== 'string' || !HEADER_VALUE.test(value)) {
      throw badRequest(`headers: the value of ${name} must be visible ASCII without line breaks, at most 998 characters`);
    }
    const lower = name.toLowerCase();
    if (seen.has(lower)) throw badRequest(`headers: ${name} is given twice`);
    seen.add(lower);
    if (lower === 'message-id') continue;
    if (OWNED.has(lower)) throw badRequest(`headers: ${name} is set by Postilion from the request fields and cannot be given as a header`);
    if (lower === 'reply-to' && fields.replyTo) throw badRequest('headers: reply-to conflicts with the reply_to field');
    if (lower === 'cc' && fields.cc) throw badRequest('headers: cc conflicts with the cc field');
    out.push([name, value]);
  }
  return out;
}

/** `"Name" <email>` with the name quoted or MIME-encoded as needed. */
export function formatAddress(address: Address): string {
  // A line break in a name must never reach the header: control characters become spaces.
  const name = address.name?.replace(/[\x00-\x1f\x7f]+/g, ' ').trim();
  if (!name) return address.email;
  const display = /^[\x20-\x7e]*$/.test(name) ? quoteString(name) : encodeWords(name, 'Q', 52, true);
  return `${display} <${address.email}>`;
}

/** One folded header line with its CRLF. */
export function headerLine(name: string, value: string): string {
  return `${foldLines(`${name}: ${value}`, 76)}\r\n`;
}

function printable(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?').slice(0, 80);
}
