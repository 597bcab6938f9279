import { buildHeaderValue, foldLines } from 'nodemailer/lib/mime-funcs';
import type { BodyContent } from './body-content.ts';
import { HeaderValues } from './header-values.ts';
import { MimeWriter } from './mime-writer.ts';
import { writeQuotedPrintable } from './quoted-printable.ts';

/**
 * Our composer for the common message: text, AMP and/or HTML, custom headers, no attachments.
 * It writes the MIME body in one synchronous pass into one Buffer, where nodemailer's
 * MailComposer streams it through a tree of stream stages (a pipeline, abort signals, an encoder
 * stream per part and a setImmediate per node), which cost more than the encoding itself.
 *
 * The output has nodemailer's shape: the same header fields in the same order, values encoded
 * as nodemailer encodes them (header-values.ts), its boundary scheme, and the same transfer encoding per
 * part (7bit, quoted-printable or base64, chosen by the same rules), so that a message reads the
 * same whichever composed it. One difference, on purpose: line breaks in the text are written
 * CRLF, where nodemailer leaves a bare CR or LF for the SMTP client to fix on the way out.
 */

/** The multipart boundary is `--_NmP-<boundary>-Part_<n>`, as nodemailer builds it. */
const BOUNDARY_PREFIX = '--_NmP';

/**
 * Custom headers nodemailer would merge with a field of its own, drop, or parse as MIME
 * structure. The API refuses most of them before composing; whatever arrives is left to
 * nodemailer rather than imitated here.
 */
const MERGED = new Set([
  'From',
  'To',
  'Bcc',
  'Subject',
  'Date',
  'Message-ID',
  'MIME-Version',
  'Content-Type',
  'Content-Transfer-Encoding',
  'Content-Disposition',
]);

const ASCII = /^[\x00-\x7f]*$/;

interface Part {
  type: string;
  /** The text in UTF-8. */
  bytes: Buffer;
  facts: TextFacts;
}

/**
 * The MIME body (everything but the per-message To and Message-ID) as store-sized chunks, or
 * null when the content is not a common message (attachments, unusual custom headers) and
 * nodemailer's composer must build it.
 */
export function buildCommonBody(content: BodyContent, boundary: string, chunkBytes: number): Buffer[] | null {
  if (content.attachments.length > 0) return null;
  const custom = customHeaderKeys(content);
  if (custom === null) return null;
  const parts = alternatives(content);
  // ASCII content: quoted-printable for any encoded word and any part that cannot go 7bit.
  const headerEncoding = parts.every((p) => p.facts.ascii) && ASCII.test(content.subject) ? 'Q' : undefined;
  const values = new HeaderValues(boundary, headerEncoding);
  const out = new MimeWriter(1024 + parts.reduce((n, p) => n + Math.ceil(p.bytes.length * 1.1), 0));

  custom.forEach((key, i) => header(out, key, values.text(key, content.headers[i]![1])));
  header(out, 'From', values.addresses('From', [content.from]));
  if (content.to) header(out, 'To', values.addresses('To', content.to));
  if (content.cc) header(out, 'Cc', values.addresses('Cc', content.cc));
  if (content.replyTo) header(out, 'Reply-To', values.addresses('Reply-To', [content.replyTo]));
  if (content.subject) header(out, 'Subject', values.text('Subject', content.subject));
  out.ascii(`Date: ${content.date.toUTCString().replace(/GMT/, '+0000')}\r\n`);

  if (parts.length > 1) {
    const delimiter = `${BOUNDARY_PREFIX}-${boundary}-Part_1`;
    out.ascii('MIME-Version: 1.0\r\n');
    out.ascii(`${foldLines(`Content-Type: ${buildHeaderValue({ value: 'multipart/alternative', params: { boundary: delimiter } })}`, 76)}\r\n\r\n`);
    parts.forEach((part, i) => {
      out.ascii(`${i > 0 ? '\r\n' : ''}--${delimiter}\r\n`);
      const encoding = transferEncoding(part, headerEncoding);
      out.ascii(`Content-Type: ${part.type}\r\nContent-Transfer-Encoding: ${encoding}\r\n\r\n`);
      writeBody(out, part, encoding);
    });
    out.ascii(`\r\n--${delimiter}--\r\n`);
  } else if (parts.length === 1) {
    const part = parts[0]!;
    const encoding = transferEncoding(part, headerEncoding);
    out.ascii(`Content-Transfer-Encoding: ${encoding}\r\nMIME-Version: 1.0\r\nContent-Type: ${part.type}\r\n\r\n`);
    if (writeBody(out, part, encoding)) out.ascii('\r\n');
  } else {
    // Neither text nor HTML (both empty): an empty text/plain body, as nodemailer writes it.
    out.ascii('MIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n');
  }
  return out.chunks(chunkBytes);
}

/** The alternatives in nodemailer's order; an empty one is left out, as it leaves it out. */
function alternatives(content: BodyContent): Part[] {
  const parts: Part[] = [];
  const add = (type: string, text: string | undefined) => {
    if (!text) return;
    // LF breaks only, the usual shape of JSON text: CRLF now, in one native replace, rather than
    // a count of the bare breaks over every byte and a rewrite of the text afterwards.
    const crlfText = !text.includes('\r') && text.includes('\n') ? text.replaceAll('\n', '\r\n') : text;
    const bytes = Buffer.from(crlfText, 'utf8');
    parts.push({ type, bytes, facts: factsOf(bytes, crlfText, text.length) });
  };
  add('text/plain; charset=utf-8', content.text);
  add('text/x-amp-html; charset=utf-8', content.amp);
  add('text/html; charset=utf-8', content.html);
  return parts;
}

/** The custom header names as nodemailer writes them, or null when one must go through nodemailer. */
function customHeaderKeys(content: BodyContent): string[] | null {
  const keys: string[] = [];
  for (const [name] of content.headers) {
    const key = headerKey(name);
    if (MERGED.has(key) || (key === 'Cc' && content.cc) || (key === 'Reply-To' && content.replyTo)) return null;
    keys.push(key);
  }
  return keys;
}

/** nodemailer's spelling of a header name: Camel-Case words, MIME, DKIM, -ID and a few others upper case. */
function headerKey(name: string): string {
  return name
    .replace(/[\s\x00-\x20\x7f:]/g, '')
    .toLowerCase()
    .replace(/^X-SMTPAPI$|^(MIME|DKIM|ARC|BIMI)\b|^OTP(?=-Token$)|^[a-z]|-(SPF|FBL|ID|MD5)$|-[a-z]/gi, (c) => c.toUpperCase())
    .replace(/^Content-Features$/i, 'Content-features');
}

/** One header field (its value encoded), folded as nodemailer does; left out when the value is empty. */
function header(out: MimeWriter, key: string, encoded: string): void {
  if (!encoded.trim()) return;
  out.utf8(`${foldLines(`${key}: ${encoded}`, 76)}\r\n`);
}

type TransferEncoding = '7bit' | 'quoted-printable' | 'base64';

/** What the choices of encoding depend on, from one scan of a part's text. */
interface TextFacts {
  /** Only code points below 0x80. */
  ascii: boolean;
  /** ASCII without control characters but TAB, CR and LF (nodemailer's isPlainText). */
  plain: boolean;
  /** Plain, and no DEL either: quoted-printable escapes only "=" and whitespace at line ends. */
  qpLiteral: boolean;
  /** A line of more than 76 characters, or more than 128 KiB of text. */
  longLine: boolean;
  /** A CR or LF that is not part of a CRLF pair. */
  looseBreak: boolean;
  /** Latin letters, and the characters that are neither ASCII text nor line breaks (-1: not counted). */
  latin: number;
  other: number;
}

const CONTROL = /[\x00-\x08\x0b\x0c\x0e-\x1f]/;
/**
 * ASCII text without a control character but TAB, CR and LF, and without DEL. A match of the
 * whole runs a few times faster than a search for a character outside it.
 */
const QP_LITERAL = /^[\t\n\r\x20-\x7e]*$/;

/** `chars`: the length of the text as given (its breaks may since have become CRLF). */
function factsOf(bytes: Buffer, text: string, chars: number): TextFacts {
  return bytes.length === text.length ? asciiFactsOf(bytes, text, chars) : bytewiseFactsOf(bytes, text.length, chars);
}

/** ASCII text with CRLF breaks, the common case: native scans (regular expressions, indexOf) rather than a loop over the bytes. */
function asciiFactsOf(bytes: Buffer, text: string, chars: number): TextFacts {
  let longest = 0;
  let lineStart = 0;
  let pairs = 0;
  // The string's own indexOf (the text is ASCII: its indices are the bytes') costs less per
  // line than the Buffer's.
  for (let lf = text.indexOf('\n'); lf !== -1; lf = text.indexOf('\n', lf + 1)) {
    if (lf === 0 || text.charCodeAt(lf - 1) !== 0x0d) return bytewiseFactsOf(bytes, text.length, chars);
    pairs++;
    if (lf - 1 - lineStart > longest) longest = lf - 1 - lineStart;
    lineStart = lf + 1;
  }
  // A CR of no CRLF pair: the byte loop measures the lines as nodemailer does.
  for (let cr = text.indexOf('\r'); cr !== -1; cr = text.indexOf('\r', cr + 1)) if (--pairs < 0) return bytewiseFactsOf(bytes, text.length, chars);
  if (bytes.length - lineStart > longest) longest = bytes.length - lineStart;
  // One scan for the usual text, which has neither control characters nor DEL.
  const literal = QP_LITERAL.test(text);
  return {
    ascii: true,
    plain: literal || !CONTROL.test(text),
    qpLiteral: literal,
    longLine: longest > 76 || chars > 128 * 1024,
    looseBreak: false,
    latin: -1,
    other: -1,
  };
}

/**
 * Counts over the UTF-8 bytes, in the UTF-16 code units nodemailer counts (a 4-byte sequence is 2).
 * `units`: the UTF-16 length of the text these bytes encode; `chars`: that of the text as given.
 */
function bytewiseFactsOf(bytes: Buffer, units: number, chars: number): TextFacts {
  let plain = true;
  let del = false;
  let looseBreak = false;
  let latin = 0;
  let other = 0;
  let lineStart = 0;
  let longest = 0;
  const length = bytes.length;
  for (let i = 0; i < length; i++) {
    const c = bytes[i]!;
    if (c >= 0x61 ? c <= 0x7a : c >= 0x41 && c <= 0x5a) {
      latin++;
    } else if (c === 0x0a || c === 0x0d) {
      if (c === 0x0d ? bytes[i + 1] !== 0x0a : i === 0 || bytes[i - 1] !== 0x0d) looseBreak = true;
      if (i - lineStart > longest) longest = i - lineStart;
      lineStart = i + 1;
    } else if (c >= 0x80) {
      plain = false;
      if (c >= 0xc0) other += c >= 0xf0 ? 2 : 1;
    } else if (c < 0x20 && c !== 0x09) {
      plain = false;
      other++;
    } else if (c === 0x7f) {
      del = true;
    }
  }
  if (length - lineStart > longest) longest = length - lineStart;
  const ascii = length === units;
  return { ascii, plain, qpLiteral: ascii && plain && !del, longLine: longest > 76 || chars > 128 * 1024, looseBreak, latin, other };
}

/**
 * nodemailer's choice: 7bit for short-lined ASCII; otherwise quoted-printable when Latin letters
 * outnumber the other characters (or when all the content is ASCII), base64 when they do not.
 */
function transferEncoding(part: Part, headerEncoding: 'Q' | undefined): TransferEncoding {
  if (part.facts.plain && !part.facts.longLine) return '7bit';
  if (headerEncoding === 'Q') return 'quoted-printable';
  const counted = part.facts.latin < 0 ? bytewiseFactsOf(part.bytes, part.bytes.length, part.bytes.length) : part.facts;
  return counted.other < counted.latin ? 'quoted-printable' : 'base64';
}

/** Writes a part's body; true when it does not end with a line break. */
function writeBody(out: MimeWriter, part: Part, encoding: TransferEncoding): boolean {
  const bytes = part.facts.looseBreak ? crlfOnly(part.bytes) : part.bytes;
  if (encoding === '7bit') out.copy(bytes, 0, bytes.length);
  else if (encoding === 'quoted-printable') writeQuotedPrintable(out, bytes, part.facts.qpLiteral);
  else writeBase64(out, bytes);
  return encoding === 'base64' || bytes[bytes.length - 1] !== 0x0a;
}

/** The text with every CR, LF and CRLF written CRLF. */
function crlfOnly(bytes: Buffer): Buffer {
  return Buffer.from(bytes.toString('utf8').replace(/\r\n|\r|\n/g, '\r\n'), 'utf8');
}

/** Base64 in lines of 76 characters, CRLF between them, none after the last. */
function writeBase64(out: MimeWriter, bytes: Buffer): void {
  const encoded = Buffer.from(bytes.toString('base64'), 'latin1');
  for (let at = 0; at < encoded.length; at += 76) {
    if (at > 0) out.ascii('\r\n');
    out.copy(encoded, at, Math.min(at + 76, encoded.length));
  }
}
