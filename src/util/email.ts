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
