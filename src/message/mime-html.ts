import { encode as base64Encode, wrap as base64Wrap } from 'nodemailer/lib/base64';
import { encode as qpEncode, wrap as qpWrap } from 'nodemailer/lib/qp';

/**
 * Rewrites the text/html parts of a whole RFC 5322 message (CRLF line ends), MIME-aware:
 * multipart bodies are walked part by part (to a depth of MAX_DEPTH), each HTML part that is
 * not an attachment is decoded (base64 or quoted-printable; UTF-8, or byte for byte for other
 * ASCII-compatible charsets), handed to `transform`, and encoded back the same way. Everything
 * else (headers, text and AMP parts, attachments, boundaries) is kept byte for byte.
 * Returns null when no part was changed.
 */
export function rewriteHtmlParts(message: Buffer, transform: (html: string) => string): Buffer | null {
  let changed = false;
  const out = walk(message, 0, (html) => {
    const next = transform(html);
    if (next !== html) changed = true;
    return next;
  });
  return changed ? out : null;
}

/** Multipart nesting followed at most; deeper parts are left as they are. */
export const MAX_DEPTH = 20;

const CRLF2 = Buffer.from('\r\n\r\n');

function walk(entity: Buffer, depth: number, transform: (html: string) => string): Buffer {
  const split = entity.indexOf(CRLF2);
  if (split < 0) return entity;
  const headText = entity.subarray(0, split + 2).toString('latin1');
  const body = entity.subarray(split + 4);
  const headers = parseHeaders(headText);
  const type = parseParams(headers.get('content-type') ?? 'text/plain');
  const mediaType = type.value.toLowerCase();
  if (mediaType.startsWith('multipart/')) {
    const boundary = type.params.get('boundary');
    if (!boundary || depth >= MAX_DEPTH) return entity;
    const rewritten = walkMultipart(body, boundary, depth, transform);
    return rewritten === body ? entity : Buffer.concat([entity.subarray(0, split + 4), rewritten]);
  }
  if (mediaType !== 'text/html') return entity;
  if (/^\s*attachment/i.test(headers.get('content-disposition') ?? '')) return entity;
  const charset = (type.params.get('charset') ?? 'utf-8').toLowerCase();
  if (/^(utf-16|utf-32|ucs-2)/.test(charset)) return entity;
  const text = charset === 'utf-8' || charset === 'utf8' || charset === 'us-ascii' ? 'utf8' : 'latin1';
  const cte = (headers.get('content-transfer-encoding') ?? '7bit').trim().toLowerCase();
  let decoded: Buffer;
  if (cte === 'base64') decoded = Buffer.from(body.toString('latin1').replace(/[^A-Za-z0-9+/=]/g, ''), 'base64');
  else if (cte === 'quoted-printable') decoded = decodeQP(body.toString('latin1'));
  else decoded = body;
  const html = decoded.toString(text);
  const next = transform(html);
  if (next === html) return entity;
  const bytes = Buffer.from(next, text);
  let head = headText;
  let encoded: string;
  if (cte === 'base64') encoded = base64Wrap(base64Encode(bytes), 76);
  else if (cte === 'quoted-printable') encoded = qpWrap(qpEncode(bytes), 76);
  else if (next.split(/\r?\n/).every((line) => Buffer.byteLength(line, text) <= 998)) encoded = bytes.toString('latin1').replace(/\r?\n/g, '\r\n');
  else {
    // A line grew past SMTP's limit: this part becomes quoted-printable.
    head = setHeader(headText, 'Content-Transfer-Encoding', 'quoted-printable');
    encoded = qpWrap(qpEncode(bytes), 76);
  }
  const trailing = /\r\n$/.test(body.toString('latin1')) && !encoded.endsWith('\r\n') ? '\r\n' : '';
  return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), Buffer.from(encoded + trailing, 'latin1')]);
}

/** The parts between `--boundary` lines, each walked; preamble, epilogue and delimiters kept. */
function walkMultipart(body: Buffer, boundary: string, depth: number, transform: (html: string) => string): Buffer {
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  const starts: number[] = [];
  for (let at = body.indexOf(delimiter); at >= 0; at = body.indexOf(delimiter, at + delimiter.length)) {
    if (at === 0 || (body[at - 2] === 0x0d && body[at - 1] === 0x0a)) starts.push(at);
  }
  if (starts.length < 2) return body;
  const pieces: Buffer[] = [];
  let changed = false;
  pieces.push(body.subarray(0, starts[0]));
  for (let i = 0; i < starts.length; i++) {
    const at = starts[i]!;
    const lineEnd = body.indexOf('\r\n', at);
    const close = body.subarray(at + delimiter.length, at + delimiter.length + 2).toString('latin1') === '--';
    if (close || lineEnd < 0 || i === starts.length - 1) {
      pieces.push(body.subarray(at));
      break;
    }
    pieces.push(body.subarray(at, lineEnd + 2));
    // The part runs to the CRLF that belongs to the next delimiter.
    const partEnd = starts[i + 1]! - 2;
    const part = body.subarray(lineEnd + 2, Math.max(lineEnd + 2, partEnd));
    const next = walk(part, depth + 1, transform);
    if (next !== part) changed = true;
    pieces.push(next, body.subarray(Math.max(lineEnd + 2, partEnd), starts[i + 1]));
  }
  return changed ? Buffer.concat(pieces) : body;
}

/** Header fields by lower-cased name (first occurrence), unfolded. */
function parseHeaders(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const field of text.replace(/\r\n(?=[ \t])/g, '').split('\r\n')) {
    const colon = field.indexOf(':');
    if (colon <= 0) continue;
    const name = field.slice(0, colon).trim().toLowerCase();
    if (!out.has(name)) out.set(name, field.slice(colon + 1).trim());
  }
  return out;
}

/** `value; a=b; c="d"` → value and parameters (names lower-cased). */
function parseParams(text: string): { value: string; params: Map<string, string> } {
  const params = new Map<string, string>();
  const [value = '', ...rest] = text.split(';');
  const joined = rest.join(';');
  for (const m of joined.matchAll(/([A-Za-z0-9*_.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))/g)) {
    params.set(m[1]!.toLowerCase(), (m[2] ?? m[3] ?? '').replace(/\\(.)/g, '$1'));
  }
  return { value: value.trim(), params };
}

/** Replaces (or adds) one header field in a header block that ends with CRLF. */
function setHeader(head: string, name: string, value: string): string {
  const pattern = new RegExp(`^${name}:.*(?:\\r\\n[ \\t].*)*\\r\\n`, 'im');
  return pattern.test(head) ? head.replace(pattern, `${name}: ${value}\r\n`) : `${head}${name}: ${value}\r\n`;
}

function decodeQP(text: string): Buffer {
  const bytes: number[] = [];
  const s = text.replace(/=\r?\n/g, '');
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x3d && /^[0-9A-Fa-f]{2}$/.test(s.slice(i + 1, i + 3))) {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(c & 0xff);
  }
  return Buffer.from(bytes);
}
