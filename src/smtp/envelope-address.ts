import { domainToASCII } from 'node:url';

/**
 * An envelope address as the listeners keep it: the domain in its ASCII form (IDNA A-labels,
 * "xn--…"), the local part as sent. smtp-server hands domains over as U-labels (it decodes
 * punycode); one form means one MX lookup, one suppression entry and one destination per domain,
 * and an IDN domain with an ASCII local part travels to any next hop without SMTPUTF8
 * (RFC 6531 §3.2 only asks for it when a local part is non-ASCII). Null when the domain is not a
 * valid IDN name.
 */
export function envelopeAddress(address: string): string | null {
  const at = address.lastIndexOf('@');
  if (at <= 0) return null;
  const domain = address.slice(at + 1);
  // An address literal ([192.0.2.1]) has no labels to convert.
  if (domain.startsWith('[')) return address;
  const ascii = domainToASCII(domain);
  return ascii === '' ? null : `${address.slice(0, at)}@${ascii}`;
}
