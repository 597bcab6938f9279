import type { MimeWriter } from './mime-writer.ts';

/** Encoded lines are at most this long, the soft-break '=' included (RFC 2045 §6.7). */
const LINE = 76;
/** How far back from the end of a full line a break at whitespace or punctuation is looked for. */
const MARGIN = Math.floor(LINE / 3);

const EQUALS = 0x3d;
const CR = 0x0d;
const LF = 0x0a;
const HEX = Buffer.from('0123456789ABCDEF', 'latin1');

/** 1 for the bytes written as they are: TAB, CR, LF and printable ASCII but '='. */
const LITERAL = new Uint8Array(256);
for (let c = 0; c < 256; c++) LITERAL[c] = c === 0x09 || c === LF || c === CR || (c >= 0x20 && c <= 0x7e && c !== EQUALS) ? 1 : 0;

/** 1 for the bytes a line may be broken after when it is full: space, tab and . , ! ? */
const BREAK_AFTER = new Uint8Array(256);
for (const c of ' \t.,!?') BREAK_AFTER[c.charCodeAt(0)] = 1;

const isHex = (c: number): boolean => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
const hexValue = (c: number): number => (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57);

/**
 * Writes `utf8` (text, line breaks already CRLF) quoted-printable, in lines of at most 76
 * characters. The soft breaks fall where nodemailer's encoder puts them (after a space or
 * punctuation near the end of a full line, never inside an escape or a UTF-8 sequence), so that
 * mail composed here reads, and mostly looks, the same as mail it composed.
 * `onlyEquals`: the text is ASCII without control characters or DEL (a faster escape).
 */
export function writeQuotedPrintable(out: MimeWriter, utf8: Buffer, onlyEquals: boolean): void {
  const escape = onlyEquals ? escapeEquals : escapeAll;
  const escaped = scratchFor(utf8.length * 3);
  let end = utf8.length;
  while (end > 0 && (utf8[end - 1] === 0x20 || utf8[end - 1] === 0x09)) end--;
  if (end === utf8.length) {
    wrap(out, escaped.subarray(0, escape(utf8, escaped, 0)), false);
    return;
  }
  // nodemailer's encoder holds whitespace at the end back until it knows the input ends, then
  // cuts its last line again with it: the soft breaks of that line follow from that. The
  // whitespace is escaped right after the text, so the held line and it are one run.
  const mainEnd = escape(utf8.subarray(0, end), escaped, 0);
  const last = wrap(out, escaped.subarray(0, mainEnd), true);
  wrap(out, escaped.subarray(last, escape(utf8.subarray(end), escaped, mainEnd)), false);
}

/** Up to this size, the buffer escaped text is written to is kept for the next message. */
const SCRATCH_KEPT = 256 * 1024;
let scratch = Buffer.allocUnsafeSlow(16 * 1024);

/**
 * A buffer for `bytes` of escaped text, valid until the next call: encoding is synchronous and
 * `wrap` copies what it cuts, so one buffer serves every message instead of one allocation each.
 */
function scratchFor(bytes: number): Buffer {
  if (bytes <= scratch.length) return scratch;
  const fresh = Buffer.allocUnsafeSlow(bytes);
  if (bytes <= SCRATCH_KEPT) scratch = fresh;
  return fresh;
}

const isBlank = (c: number | undefined): boolean => c === 0x20 || c === 0x09;

/**
 * Escapes ASCII text whose only bytes to escape are "=" and whitespace before a line break or at
 * the end (no control characters, no DEL), into `out` from `start`: the runs between are copied,
 * not looped over. Returns where the escaped text ends.
 */
function escapeEquals(bytes: Buffer, out: Buffer, start: number): number {
  const len = bytes.length;
  // Where the escaped text has reached in `out`, and the next byte of `bytes` not yet copied.
  let o = start;
  let from = 0;
  let eq = bytes.indexOf(EQUALS);
  let cr = bytes.indexOf(CR);
  while (eq !== -1 || cr !== -1) {
    let at: number;
    if (eq !== -1 && (cr === -1 || eq < cr)) {
      at = eq;
      eq = bytes.indexOf(EQUALS, eq + 1);
    } else {
      at = cr - 1;
      cr = bytes.indexOf(CR, cr + 1);
      if (at < from || !isBlank(bytes[at])) continue;
    }
    o = escapeByte(bytes, from, at, out, o);
    from = at + 1;
  }
  if (len > from && isBlank(bytes[len - 1])) {
    o = escapeByte(bytes, from, len - 1, out, o);
    from = len;
  }
  return o + bytes.copy(out, o, from, len);
}

/** Copies bytes[from..at) to out[o..) and escapes bytes[at] after them; returns the new end in `out`. */
function escapeByte(bytes: Buffer, from: number, at: number, out: Buffer, o: number): number {
  o += bytes.copy(out, o, from, at);
  const c = bytes[at]!;
  out[o] = EQUALS;
  out[o + 1] = HEX[c >> 4]!;
  out[o + 2] = HEX[c & 15]!;
  return o + 3;
}

/**
 * Escapes the bytes QP cannot carry, and whitespace at the end of a line or of the text, into
 * `out` from `start`; returns where the escaped text ends.
 */
function escapeAll(bytes: Buffer, out: Buffer, start: number): number {
  const len = bytes.length;
  let o = start;
  for (let i = 0; i < len; i++) {
    const c = bytes[i]!;
    if (LITERAL[c] === 1) {
      if (c !== 0x20 && c !== 0x09) {
        out[o++] = c;
        continue;
      }
      const next = i + 1 < len ? bytes[i + 1]! : -1;
      if (next !== -1 && next !== CR && next !== LF) {
        out[o++] = c;
        continue;
      }
    }
    out[o++] = EQUALS;
    out[o++] = HEX[c >> 4]!;
    out[o++] = HEX[c & 15]!;
  }
  return o;
}

/**
 * Cuts escaped text into lines of at most 76 characters with soft breaks ("=\r\n"). With
 * `holdLast`, the last line (the text after the last line break written) is not written: its
 * start is returned.
 */
function wrap(out: MimeWriter, src: Buffer, holdLast: boolean): number {
  const len = src.length;
  if (len <= LINE) {
    if (holdLast) return 0;
    out.copy(src, 0, len);
    return len;
  }
  let pos = 0;
  let crlf = -1;
  while (pos < len) {
    const end = Math.min(pos + LINE, len);
    // A hard line break within reach ends the line. Every CR here starts a CRLF (bare breaks
    // were made CRLF before encoding), so the byte is looked for, not the pair.
    if (crlf !== len && crlf < pos) {
      crlf = src.indexOf(CR, pos);
      if (crlf === -1) crlf = len;
    }
    if (crlf + 2 <= end) {
      out.copy(src, pos, crlf + 2);
      pos = crlf + 2;
      continue;
    }
    let cut = fullLineCut(src, pos, end);
    if (cut === pos) cut = end;
    let take = cut - pos;
    if (cut < len) {
      // The soft break's '=' must fit: give back a whole escape, or one character.
      if (take === LINE) take -= endsWithEscape(src, cut) ? 3 : 1;
      out.copy(src, pos, pos + take);
      out.softBreak();
    } else {
      if (holdLast) return pos;
      out.copy(src, pos, pos + take);
    }
    pos += take;
  }
  return pos;
}

/**
 * Where the line that starts at `pos` and could reach `end` is cut: after the last space or
 * punctuation in its last third, or else before an escape or UTF-8 sequence that the end
 * would split.
 */
function fullLineCut(src: Buffer, pos: number, end: number): number {
  const length = end - pos;
  if (length > LINE - MARGIN) {
    for (let i = end - 1; i >= Math.max(pos, end - MARGIN); i--) if (BREAK_AFTER[src[i]!] === 1) return i + 1;
  }
  // An escape cut short ("=" or "=X") goes to the next line whole.
  let cut = end;
  if (src[end - 1] === EQUALS) cut = end - 1;
  else if (length >= 2 && src[end - 2] === EQUALS && isHex(src[end - 1]!)) cut = end - 2;
  else if (!(length >= 3 && src[end - 3] === EQUALS && isHex(src[end - 2]!) && isHex(src[end - 1]!))) return end;
  // Escaped UTF-8 bytes of one character stay on one line: continuation bytes (0x80-0xbf) move
  // with the lead byte (0xc0 and above) they follow.
  while (cut - pos > 3 && cut < src.length && !allEscapes(src, pos, cut) && endsWithEscape(src, cut)) {
    const code = hexValue(src[cut - 2]!) * 16 + hexValue(src[cut - 1]!);
    if (code < 0x80) break;
    cut -= 3;
    if (code >= 0xc0) break;
  }
  return cut;
}

/** Whether src[..at) ends with a complete escape "=XX". */
function endsWithEscape(src: Buffer, at: number): boolean {
  return at >= 3 && src[at - 3] === EQUALS && isHex(src[at - 2]!) && isHex(src[at - 1]!);
}

/** Whether src[from..to) is one to four escapes and nothing else. */
function allEscapes(src: Buffer, from: number, to: number): boolean {
  const length = to - from;
  if (length % 3 !== 0 || length === 0 || length > 12) return false;
  for (let i = from; i < to; i += 3) if (src[i] !== EQUALS || !isHex(src[i + 1]!) || !isHex(src[i + 2]!)) return false;
  return true;
}
