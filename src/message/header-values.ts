import { quoteString } from 'nodemailer/lib/mime-funcs';
import MimeNode, { type MimeNodeHeaderValue } from 'nodemailer/lib/mime-node';
import type { Address } from './headers.ts';

/** Header fields whose values nodemailer parses or reformats (addresses, ids, MIME structure). */
const STRUCTURED = new Set([
  'From',
  'Sender',
  'To',
  'Cc',
  'Bcc',
  'Reply-To',
  'Message-ID',
  'In-Reply-To',
  'Content-ID',
  'References',
  'OTP-Token',
  'Date',
  'Content-Type',
  'Content-Disposition',
]);

/** Visible ASCII, space and tab, without a quote or "=?": nodemailer writes such text as it is. */
const PLAIN_TEXT = /^[\t\x20-\x21\x23-\x7e]*$/;

/**
 * An address nodemailer writes as it is: a dot-atom local part at a lower-case host name whose
 * last label starts with a letter and no label holds "--" (so that no IDNA or IPv4 rule of its
 * domain normalisation rewrites it).
 */
const PLAIN_ADDRESS = /^[\w!#$%&'*+\-/=?^`{|}~]+(?:\.[\w!#$%&'*+\-/=?^`{|}~]+)*@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*[a-z][a-z0-9-]*[a-z0-9]$/;
const BARE_NAME = /^[\w ]*$/;
const PRINTABLE = /^[\x20-\x7e]*$/;

/**
 * Header values as nodemailer's MimeNode encodes them: plain ASCII text and plain addresses
 * directly, anything else (encoded words, IDN domains, quoting of local parts, ids) by a node of
 * nodemailer's own, made when first needed.
 */
export class HeaderValues {
  private node: MimeNode | null = null;

  /** `textEncoding` 'Q' forces quoted-printable encoded words (ASCII content). */
  constructor(
    private readonly boundary: string,
    private readonly textEncoding: 'Q' | undefined,
  ) {}

  text(key: string, value: string): string {
    if (!STRUCTURED.has(key) && PLAIN_TEXT.test(value) && !value.includes('=?')) return value;
    return this.encoded(key, value);
  }

  addresses(key: string, list: Address[]): string {
    const out: string[] = [];
    for (const a of list) {
      const written = plainMailbox(a);
      if (written === null) return this.encoded(key, list.map(mailbox));
      out.push(written);
    }
    return out.join(', ');
  }

  private encoded(key: string, value: MimeNodeHeaderValue): string {
    this.node ??= new MimeNode(false, { baseBoundary: this.boundary, textEncoding: this.textEncoding });
    return this.node.encodeHeaderValue(key, value);
  }
}

function plainMailbox(a: Address): string | null {
  if (!PLAIN_ADDRESS.test(a.email) || a.email.includes('--')) return null;
  const name = a.name ?? '';
  if (!name) return a.email;
  if (BARE_NAME.test(name)) return `${name} <${a.email}>`;
  if (PRINTABLE.test(name)) return `${quoteString(name)} <${a.email}>`;
  return null;
}

function mailbox(a: Address): { name: string; address: string } {
  return { name: a.name ?? '', address: a.email };
}
