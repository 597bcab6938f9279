import { isValidDomain, normalizeDomain } from './domain-name.ts';

/**
 * A mailbox address as Postilion accepts it from operators and API clients: a local part and a
 * domain without spaces, at most 254 characters. Dotless domains (postmaster@localhost) pass.
 */
export function isEmailAddress(text: string): boolean {
  return text.length <= 254 && /^[^\s@]+@[^\s@]+$/.test(text);
}

const ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
const DOT_ATOM = new RegExp(`^${ATOM}(?:\\.${ATOM})*$`);

/**
 * An address mail can be sent to and written unquoted into a header: a dot-atom local part
 * (no commas, angle brackets, quotes or spaces that would change a header's meaning) at a
 * fully qualified domain name, at most 254 characters. Domains are compared case-insensitively.
 */
export function isMailboxAddress(text: string): boolean {
  const at = text.lastIndexOf('@');
  if (at <= 0 || text.length > 254) return false;
  const local = text.slice(0, at);
  return local.length <= 64 && DOT_ATOM.test(local) && isValidDomain(text.slice(at + 1).toLowerCase());
}

/** The normalised domain part of an address (everything after the last `@`). */
export function domainOf(address: string): string {
  return normalizeDomain(address.slice(address.lastIndexOf('@') + 1));
}

/** atext (RFC 5322 §3.2.3) plus the UTF-8 non-ASCII characters RFC 6532 §3.2 adds to it. */
const UTF8_ATOM = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\u0080-\\u{10FFFF}-]+";
const UTF8_DOT_ATOM = new RegExp(`^${UTF8_ATOM}(?:\\.${UTF8_ATOM})*$`, 'u');

/**
 * An address of an SMTPUTF8 transaction (RFC 6531): isMailboxAddress, except that the local part
 * may hold UTF-8 characters (at most 64 octets). The domain must already be in its ASCII form
 * (A-labels: see smtp/envelope-address.ts), so every hop, DNS lookup and suppression sees one form.
 */
export function isUtf8MailboxAddress(text: string): boolean {
  const at = text.lastIndexOf('@');
  if (at <= 0 || Buffer.byteLength(text) > 254) return false;
  const local = text.slice(0, at);
  return Buffer.byteLength(local) <= 64 && UTF8_DOT_ATOM.test(local) && isValidDomain(text.slice(at + 1).toLowerCase());
}

/** Whether an address needs SMTPUTF8 to travel: a local part with non-ASCII characters. */
export function needsSmtpUtf8(address: string): boolean {
  return /[^\x00-\x7f]/.test(address);
}
