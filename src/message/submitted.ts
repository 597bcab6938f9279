import { SANDBOX_RESULTS, type SandboxResult } from '../store/records.ts';
import { badRequest } from '../util/errors.ts';
import { truncate } from '../util/text.ts';
import { rfc5322Date } from '../bounce/dsn.ts';
import { checkTags } from './send.ts';

/** What the special `ahasend-*` headers of a submitted message ask for (absent: not given). */
export interface SubmittedOptions {
  trackOpens?: boolean;
  trackClicks?: boolean;
  sandbox?: boolean;
  sandboxResult?: SandboxResult;
  metadataRetention?: number;
  dataRetention?: number;
  tags?: string[];
}

/** A message as submitted over SMTP, made ready to store: special headers applied and removed. */
export interface PreparedMessage {
  /** Header block and body, CRLF line ends, without the special headers (and without Bcc). */
  message: Buffer;
  options: SubmittedOptions;
  /** The Message-ID header (with angle brackets): the client's, or the one added. */
  messageId: string;
  /**
   * The decoded Subject, '' when there is none, cut to SUBJECT_RECORD_CHARS: it is copied into
   * every recipient's record (the message itself keeps it whole).
   */
  subject: string;
}

/** Headers that tell Postilion what to do; applied, then stripped before delivery. */
const SPECIAL = new Set([
  'ahasend-track-opens',
  'ahasend-track-clicks',
  'ahasend-sandbox',
  'ahasend-sandbox-result',
  'ahasend-metadata-retention',
  'ahasend-data-retention',
  'ahasend-tags',
]);

const MESSAGE_ID = /^<[^<>\s@]+@[^<>\s@]+>$/;

/** What the API takes as a subject, and what the subject filter of the message list can match. */
export const SUBJECT_RECORD_CHARS = 998;

/**
 * Reads the header block of a submitted message: applies and strips the special headers, drops
 * Bcc (the envelope carries those recipients), adds Message-ID (`generatedId`) and Date when
 * missing, and puts the `received` trace field on top. A bad special header value is an error naming the header (400 here, 550 over SMTP).
 */
export function prepareSubmitted(raw: Buffer, generatedId: string, now: number, received?: string): PreparedMessage {
  const split = headerEnd(raw);
  const headerText = raw.subarray(0, split.headerEnd).toString('latin1');
  const fields = splitFields(headerText);
  const options: SubmittedOptions = {};
  const kept: string[] = [];
  let messageId: string | null = null;
  let subject = '';
  let hasDate = false;
  let froms = 0;
  for (const field of fields) {
    const colon = field.indexOf(':');
    const name = (colon < 0 ? field : field.slice(0, colon)).trim().toLowerCase();
    const value = colon < 0 ? '' : unfold(field.slice(colon + 1)).trim();
    if (SPECIAL.has(name)) {
      applySpecial(options, name, value);
      continue;
    }
    if (name === 'bcc') continue;
    if (name === 'message-id') {
      if (messageId !== null || !MESSAGE_ID.test(value)) continue;
      messageId = value;
    }
    if (name === 'subject') subject = truncate(decodeWords(Buffer.from(value, 'latin1').toString('utf8')), SUBJECT_RECORD_CHARS);
    if (name === 'date') hasDate = true;
    if (name === 'from') froms++;
    kept.push(field);
  }
  // DKIM signs From, and receivers judge the mail by it (RFC 5322 §3.6: exactly one).
  if (froms !== 1) throw badRequest(froms === 0 ? 'the message has no From header' : 'the message has more than one From header');
  const added: string[] = [];
  if (messageId === null) {
    messageId = generatedId;
    added.push(`Message-ID: ${generatedId}`);
  }
  if (!hasDate) added.push(`Date: ${rfc5322Date(new Date(now))}`);
  // Our trace field goes on top (RFC 5321 §4.4), above what the client wrote.
  const head = Buffer.from([...(received ? [received] : []), ...added, ...kept].map((f) => f + '\r\n').join(''), 'latin1');
  const body = raw.subarray(split.bodyStart);
  return { message: Buffer.concat([head, Buffer.from('\r\n'), toCrlf(body)]), options, messageId, subject };
}

function applySpecial(options: SubmittedOptions, name: string, value: string): void {
  switch (name) {
    case 'ahasend-track-opens':
      options.trackOpens = flag(name, value);
      return;
    case 'ahasend-track-clicks':
      options.trackClicks = flag(name, value);
      return;
    case 'ahasend-sandbox':
      options.sandbox = flag(name, value);
      return;
    case 'ahasend-sandbox-result': {
      const result = value.toLowerCase();
      if (!(SANDBOX_RESULTS as readonly string[]).includes(result)) throw badRequest(`${name} must be one of ${SANDBOX_RESULTS.join(', ')}`);
      options.sandboxResult = result as SandboxResult;
      return;
    }
    case 'ahasend-metadata-retention':
      options.metadataRetention = days(name, value, 1);
      return;
    case 'ahasend-data-retention':
      options.dataRetention = days(name, value, 0);
      return;
    case 'ahasend-tags':
      options.tags = checkTags(
        value
          .split(',')
          .map((t) => t.trim())
          .filter((t) => t.length > 0),
      );
      return;
  }
}

function flag(name: string, value: string): boolean {
  const v = value.toLowerCase();
  if (v === 'true' || v === '1' || v === 'yes') return true;
  if (v === 'false' || v === '0' || v === 'no') return false;
  throw badRequest(`${name} must be true or false`);
}

function days(name: string, value: string, min: number): number {
  if (!/^\d{1,2}$/.test(value) || Number(value) < min || Number(value) > 30) throw badRequest(`${name} must be a whole number of days from ${min} to 30`);
  return Number(value);
}

/** Where the header block ends and the body starts (after the empty line), in bytes. */
function headerEnd(raw: Buffer): { headerEnd: number; bodyStart: number } {
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { headerEnd: crlf, bodyStart: crlf + 4 };
  if (lf >= 0) return { headerEnd: lf, bodyStart: lf + 2 };
  // No body: the whole message is headers.
  return { headerEnd: raw.length, bodyStart: raw.length };
}

/** Header fields with their folded continuation lines, line ends removed between them. */
function splitFields(text: string): string[] {
  const fields: string[] = [];
  for (const line of text.split(/\r?\n/).map((l) => l.replace(/\r$/, ''))) {
    if (line === '') continue;
    if ((line.startsWith(' ') || line.startsWith('\t')) && fields.length > 0) fields[fields.length - 1] += '\r\n' + line;
    else fields.push(line);
  }
  return fields;
}

function unfold(value: string): string {
  return value.replace(/\r?\n(?=[ \t])/g, '');
}

function toCrlf(body: Buffer): Buffer {
  // Bare LF line ends (some clients) become CRLF, as SMTP and DKIM expect.
  return body.includes('\n') && !body.includes('\r\n') ? Buffer.from(body.toString('latin1').replace(/\n/g, '\r\n'), 'latin1') : body;
}

/** Decodes RFC 2047 encoded words (`=?charset?B|Q?text?=`); unknown charsets stay as they are. */
export function decodeWords(value: string): string {
  return value
    .replace(/(=\?[^?]+\?[BbQq]\?[^?]*\?=)\s+(?==\?)/g, '$1')
    .replace(/=\?([^?*]+)(?:\*[^?]*)?\?([BbQq])\?([^?]*)\?=/g, (word, charset: string, encoding: string, text: string) => {
      try {
        const bytes =
          encoding.toUpperCase() === 'B'
            ? Buffer.from(text, 'base64')
            : Buffer.from(
                text.replace(/_/g, ' ').replace(/=([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))),
                'latin1',
              );
        return new TextDecoder(charset.toLowerCase()).decode(bytes);
      } catch {
        return word;
      }
    });
}
