import MailComposer, { type MailComposerAttachment } from 'nodemailer/lib/mail-composer';
import { BODY_CHUNK_BYTES } from '../store/messages-repo.ts';
import { badRequest } from '../util/errors.ts';
import { formatAddress, headerLine, type Address } from './headers.ts';
import type { BodyContent } from './body-content.ts';
import { buildCommonBody } from './mime-builder.ts';

export type { BodyContent } from './body-content.ts';

/** An attachment as the API takes it. */
export interface AttachmentInput {
  data: string;
  base64?: boolean | undefined;
  file_name: string;
  content_type: string;
  content_id?: string | undefined;
  content_disposition?: string | undefined;
}

export interface ComposedBody {
  chunks: Buffer[];
  size: number;
}

/**
 * A run of 998 characters without a space or tab: folding (at whitespace only, RFC 5322 §2.2.3)
 * would leave it on a line of its own after the folding space, 999 octets and more, past the
 * 998 that RFC 5322 §2.1.1 and RFC 5321 §4.5.3.1.6 allow. The SMTP listeners refuse such lines
 * (smtp/line-check.ts); mail built here must never hold one.
 */
const UNFOLDABLE = /[^ \t]{998}/;

/** Subject and custom headers must fold into lines of at most 998 octets, or the request is a 400. */
function checkFoldable(content: BodyContent): void {
  // A non-ASCII subject becomes encoded-words, which the composer splits itself.
  if (/^[\x00-\x7f]*$/.test(content.subject) && UNFOLDABLE.test(content.subject)) {
    throw badRequest(
      'subject has a word of 998 characters or more without a space: it cannot be folded into lines of at most 998 characters (RFC 5322 §2.1.1)',
    );
  }
  for (const [name, value] of content.headers) {
    if (UNFOLDABLE.test(value))
      throw badRequest(
        `headers: the value of ${name} has a word of 998 characters or more without a space: it cannot be folded into lines of at most 998 characters (RFC 5322 §2.1.1)`,
      );
  }
}

/** Stands in for the Message-ID while composing; removed from the shared body. */
const PLACEHOLDER_ID = '<postilion-shared-body@invalid>';
const PLACEHOLDER_LINE = `Message-ID: ${PLACEHOLDER_ID}\r\n`;

/**
 * Builds the MIME body as store-sized chunks: the common message (text, AMP and/or HTML, custom
 * headers) with our own composer, in one synchronous pass; anything else (attachments, inline
 * images, unusual custom headers) with nodemailer's. `boundary` is the unique part of the
 * multipart boundaries (random, unique to the body).
 */
export async function composeBody(content: BodyContent, boundary: string): Promise<ComposedBody> {
  checkFoldable(content);
  const common = buildCommonBody(content, boundary, BODY_CHUNK_BYTES);
  if (common !== null) return { chunks: common, size: common.reduce((n, c) => n + c.length, 0) };
  return composeWithNodemailer(content, boundary);
}

/**
 * nodemailer's composer (multipart/alternative of text, AMP and HTML; multipart/related for
 * inline images; multipart/mixed for attachments), collected as store-sized chunks as it streams
 * out. No file or URL access: content comes from the request.
 */
export async function composeWithNodemailer(content: BodyContent, boundary: string): Promise<ComposedBody> {
  checkFoldable(content);
  const composer = new MailComposer({
    baseBoundary: boundary,
    from: { name: content.from.name ?? '', address: content.from.email },
    ...(content.to ? { to: content.to.map(toNodemailer) } : {}),
    ...(content.cc ? { cc: content.cc.map(toNodemailer) } : {}),
    ...(content.replyTo ? { replyTo: toNodemailer(content.replyTo) } : {}),
    subject: content.subject,
    ...(content.text !== undefined ? { text: content.text } : {}),
    ...(content.html !== undefined ? { html: content.html } : {}),
    ...(content.amp !== undefined ? { amp: content.amp } : {}),
    attachments: content.attachments,
    headers: content.headers.map(([key, value]) => ({ key, value })),
    messageId: PLACEHOLDER_ID,
    date: content.date,
    disableFileAccess: true,
    disableUrlAccess: true,
    // ASCII text goes quoted-printable without nodemailer counting characters to choose;
    // other text is left to its choice (base64 when mostly non-Latin).
    ...(isAscii(content) ? { textEncoding: 'quoted-printable' } : {}),
  });
  const stream = composer.compile().createReadStream();
  const chunks: Buffer[] = [];
  let pieces: Buffer[] = [];
  let piecesLength = 0;
  let head: string | null = '';
  let size = 0;
  // Pieces (often single encoded lines) gather until they fill a chunk, then are joined once.
  const flush = () => {
    const joined = Buffer.concat(pieces, piecesLength);
    let offset = 0;
    for (; joined.length - offset >= BODY_CHUNK_BYTES; offset += BODY_CHUNK_BYTES) chunks.push(joined.subarray(offset, offset + BODY_CHUNK_BYTES));
    pieces = offset < joined.length ? [joined.subarray(offset)] : [];
    piecesLength = joined.length - offset;
  };
  const emit = (data: Buffer) => {
    size += data.length;
    pieces.push(data);
    piecesLength += data.length;
    if (piecesLength >= BODY_CHUNK_BYTES) flush();
  };
  // 'data' events rather than async iteration: the iterator's per-chunk promises and abort
  // signals cost more than the encoding of a small message.
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (data: Buffer) => {
      if (head === null) return emit(data);
      // The root header block is small: hold it until it ends, then drop the placeholder line.
      head += data.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      emit(Buffer.from(head.replace(PLACEHOLDER_LINE, ''), 'latin1'));
      head = null;
    });
    stream.once('error', reject);
    stream.once('end', resolve);
  });
  if (head !== null) emit(Buffer.from(head.replace(PLACEHOLDER_LINE, ''), 'latin1'));
  if (piecesLength > 0) chunks.push(Buffer.concat(pieces, piecesLength));
  return { chunks, size };
}

/** The per-message header block: To (one recipient per message) and the Message-ID. */
export function messageHead(messageId: string, to?: Address): string {
  return (to ? headerLine('To', formatAddress(to)) : '') + headerLine('Message-ID', messageId);
}

/**
 * Checks and converts request attachments. `inlineRule` says when an attachment is inline:
 * `brackets` (v2: content_id written `<cid>`) or `any` (v1: any non-empty content_id).
 */
export function attachmentsFor(list: AttachmentInput[] | undefined, inlineRule: 'brackets' | 'any'): MailComposerAttachment[] {
  return (list ?? []).map((a, i) => {
    const where = `attachments[${i}]`;
    const out: MailComposerAttachment = {
      content: a.base64 ? decodeBase64(a.data, where) : a.data,
      filename: a.file_name,
      contentType: a.content_type,
    };
    const cid = a.content_id?.trim() ?? '';
    const bracketed = /^<([^<>\s]+)>$/.exec(cid);
    if (bracketed && inlineRule === 'brackets') out.cid = bracketed[1]!;
    else if (cid && inlineRule === 'any') out.cid = bracketed ? bracketed[1]! : cid;
    if (a.content_disposition !== undefined) {
      const disposition = a.content_disposition.trim().toLowerCase();
      if (disposition !== 'inline' && disposition !== 'attachment') {
        throw badRequest(`${where}.content_disposition must be inline or attachment`);
      }
      out.contentDisposition = disposition;
    } else if (out.cid) {
      out.contentDisposition = 'inline';
    }
    return out;
  });
}

function decodeBase64(data: string, where: string): Buffer {
  const compact = data.replace(/[\r\n\t ]/g, '');
  if (compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) {
    throw badRequest(`${where}.data is not valid base64`);
  }
  return Buffer.from(compact, 'base64');
}

function isAscii(content: BodyContent): boolean {
  const nonAscii = /[^\x00-\x7f]/;
  return ![content.subject, content.text, content.html, content.amp].some((t) => t !== undefined && nonAscii.test(t));
}

function toNodemailer(a: Address): { name: string; address: string } {
  return { name: a.name ?? '', address: a.email };
}
