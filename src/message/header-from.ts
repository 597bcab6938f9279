import { domainToASCII } from 'node:url';
import addressparser from 'nodemailer/lib/addressparser';

/** Addresses of one From field read at most (a list longer than this is refused as it is). */
export const MAX_FROM_ADDRESSES = 20;

/**
 * The addresses of a message's From field (RFC 5322 §3.6.2), their domains in A-label form; null
 * when the header block has no From field or more than one (accept() refuses those already).
 * An address that is not one (no domain, an invalid IDN name) comes back as it was written, for
 * the caller to refuse by name.
 */
export function headerFromAddresses(head: Buffer): Array<{ address: string; valid: boolean }> | null {
  // Only the header block is read: the body may be megabytes.
  const text = headerBlock(head).toString('latin1');
  const end = text.search(/\r?\n\r?\n/);
  const block = (end < 0 ? text : text.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  const fields = block.split(/\r?\n/).filter((line) => /^From[ \t]*:/i.test(line));
  if (fields.length !== 1) return null;
  // The field's bytes as sent: UTF-8 under SMTPUTF8 (RFC 6532), else ASCII.
  const value = Buffer.from(fields[0]!.slice(fields[0]!.indexOf(':') + 1), 'latin1').toString('utf8');
  const mailboxes = addressparser(value, { flatten: true }) as Array<{ name?: string; address?: string }>;
  // A word without @ comes back as a name: it is named as written.
  return mailboxes.slice(0, MAX_FROM_ADDRESSES + 1).map((m) => (m.address ? ascii(m.address) : { address: m.name ?? '', valid: false }));
}

/** The bytes up to the first empty line (CRLF CRLF, or bare LF LF), with that line's start. */
function headerBlock(head: Buffer): Buffer {
  const ends = [head.indexOf('\r\n\r\n'), head.indexOf('\n\n')].filter((at) => at >= 0);
  return ends.length === 0 ? head : head.subarray(0, Math.min(...ends) + 2);
}

function ascii(address: string): { address: string; valid: boolean } {
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return { address, valid: false };
  const domain = domainToASCII(address.slice(at + 1));
  return domain === '' ? { address, valid: false } : { address: `${address.slice(0, at)}@${domain}`, valid: true };
}
