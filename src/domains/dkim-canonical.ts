import { createHash, type Hash } from 'node:crypto';

/**
 * DKIM relaxed canonicalisation (RFC 6376 §3.4.2, §3.4.4), for signing.
 *
 * Line ends are taken as SMTP will carry them: nodemailer's DATA stream turns CRLF, a bare LF and
 * a bare CR each into one CRLF, so the canonical forms here count each of them as one line end.
 */

const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HTAB = 0x09;
const CRLF = Buffer.from('\r\n');

/**
 * The relaxed body hash as a stream stage: feed the body in chunks of any size, then `digest()`.
 * Whitespace runs become one SP, whitespace at line ends goes, empty lines at the end go, and a
 * non-empty body ends with exactly one CRLF; an empty body hashes as nothing.
 */
export class RelaxedBodyHash {
  private readonly hash: Hash;
  /** Line ends seen since the last content byte: written only if more content follows. */
  private lineEnds = 0;
  private space = false;
  private afterCr = false;
  private content = false;

  constructor(algorithm = 'sha256') {
    this.hash = createHash(algorithm);
  }

  update(chunk: Buffer): this {
    // Worst case every byte is a bare line end that becomes CRLF.
    const out = Buffer.allocUnsafe(chunk.length * 2 + 1);
    let n = 0;
    // The state in locals while scanning: this loop is per byte of every message sent.
    let { lineEnds, space, afterCr, content } = this;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      if (byte === LF) {
        if (afterCr) {
          afterCr = false; // the LF of a CRLF already counted
        } else {
          space = false;
          lineEnds += 1;
        }
        continue;
      }
      afterCr = false;
      if (byte === CR) {
        space = false;
        lineEnds += 1;
        afterCr = true;
      } else if (byte === SP || byte === HTAB) {
        space = true;
      } else {
        if (lineEnds > 0) {
          // Carried over from earlier chunks, there may be more than this buffer holds.
          if (n + 2 * lineEnds + 2 > out.length) {
            this.hash.update(out.subarray(0, n));
            for (let k = 0; k < lineEnds; k++) this.hash.update(CRLF);
            n = 0;
          } else {
            for (let k = 0; k < lineEnds; k++) {
              out[n++] = CR;
              out[n++] = LF;
            }
          }
          lineEnds = 0;
        }
        if (space) {
          out[n++] = SP;
          space = false;
        }
        out[n++] = byte;
        content = true;
      }
    }
    this.lineEnds = lineEnds;
    this.space = space;
    this.afterCr = afterCr;
    this.content = content;
    if (n > 0) this.hash.update(out.subarray(0, n));
    return this;
  }

  /** The base64 hash (the `bh=` value). */
  digest(): string {
    if (this.content) this.hash.update(CRLF);
    return this.hash.digest('base64');
  }
}

/** One header field as it appears in the message: its lower-cased name and its text, folds included. */
export interface HeaderField {
  name: string;
  /** `Name: value` with its continuation lines (joined by CRLF), without the final line end. */
  raw: string;
}

/** The fields of a header block (latin1 text, so that bytes go through unchanged). */
export function parseHeaderFields(block: string): HeaderField[] {
  const fields: HeaderField[] = [];
  // Line by line with indexOf: this runs for every message signed.
  let start = 0;
  while (start < block.length) {
    let end = start;
    while (end < block.length) {
      const c = block.charCodeAt(end);
      if (c === CR || c === LF) break;
      end++;
    }
    const line = block.slice(start, end);
    start = end + (block.charCodeAt(end) === CR && block.charCodeAt(end + 1) === LF ? 2 : 1);
    if (line === '') continue;
    const last = fields[fields.length - 1];
    const first = line.charCodeAt(0);
    if ((first === SP || first === HTAB) && last) {
      last.raw += `\r\n${line}`;
      continue;
    }
    const colon = line.indexOf(':');
    // Not a field (no colon): it cannot be signed, and verifiers skip it too.
    if (colon <= 0) continue;
    fields.push({ name: fieldName(line, colon), raw: line });
  }
  return fields;
}

/** The lower-cased name before the colon, whitespace before the colon dropped. */
function fieldName(raw: string, colon: number): string {
  let end = colon < 0 ? raw.length + colon : colon;
  while (end > 0 && (raw.charCodeAt(end - 1) === SP || raw.charCodeAt(end - 1) === HTAB)) end--;
  return raw.slice(0, end).toLowerCase();
}

/** A value needs the full treatment when it has a line end, a tab or a run of spaces. */
const UNUSUAL_SPACE = /[\r\n\t]| {2}/;

/** A field in relaxed form: lower-case name, unfolded, whitespace runs as one SP, trimmed value. */
export function relaxedHeader(raw: string): string {
  const colon = raw.indexOf(':');
  const name = fieldName(raw, colon);
  // Only SP and HTAB are whitespace here (RFC 6376 §3.4.2); String.trim would also take 0xA0,
  // the last byte of many UTF-8 characters read as latin1.
  let value = raw.slice(colon + 1);
  if (UNUSUAL_SPACE.test(value)) {
    value = value
      .replace(/\r\n|\r|\n/g, '')
      .replace(/[ \t]+/g, ' ')
      .replace(/^ | $/g, '');
  } else {
    // At most single spaces: one may lead, one may trail.
    const from = value.charCodeAt(0) === SP ? 1 : 0;
    const to = value.length > from && value.charCodeAt(value.length - 1) === SP ? value.length - 1 : value.length;
    if (from > 0 || to < value.length) value = value.slice(from, to);
  }
  return `${name}:${value}`;
}

/**
 * Which fields to sign, in `h=` order: every instance of each listed name, from the bottom up
 * (the order verifiers take them in), and each `oversigned` name once more than it occurs, so
 * that adding such a field later breaks the signature (RFC 6376 §8.15).
 */
export function signedFields(fields: HeaderField[], names: readonly string[], oversigned: ReadonlySet<string>): { h: string[]; fields: HeaderField[] } {
  const h: string[] = [];
  const chosen: HeaderField[] = [];
  for (const name of names) {
    const key = name.toLowerCase();
    let found = 0;
    for (let i = fields.length - 1; i >= 0; i--) {
      if (fields[i]!.name !== key) continue;
      h.push(name);
      chosen.push(fields[i]!);
      found += 1;
    }
    if (found > 0 && oversigned.has(key)) h.push(name);
  }
  return { h, fields: chosen };
}

/**
 * Splits a message into its header block and body as it streams by: the header block is kept
 * (it is small), the body goes through `RelaxedBodyHash` and is not kept.
 */
export class DkimMessageReader {
  private readonly body = new RelaxedBodyHash();
  private head: Buffer | null = Buffer.alloc(0);
  private header = '';
  /** Where the line being scanned starts in `head`. */
  private lineStart = 0;

  update(chunk: Buffer): this {
    if (this.head === null) {
      this.body.update(chunk);
      return this;
    }
    this.head = this.head.length === 0 ? chunk : Buffer.concat([this.head, chunk]);
    this.scan(false);
    return this;
  }

  /** The header block (latin1, line ends as they were) and the body hash. */
  end(): { header: string; bodyHash: string } {
    if (this.head !== null) this.scan(true);
    // No empty line at all: everything was header, and the body is empty.
    if (this.head !== null) {
      this.header = this.head.toString('latin1');
      this.head = null;
    }
    return { header: this.header, bodyHash: this.body.digest() };
  }

  /** Looks for the empty line that ends the header block; past it, the rest is body. */
  private scan(final: boolean): void {
    const head = this.head!;
    let i = this.lineStart;
    while (i < head.length) {
      const byte = head[i]!;
      if (byte !== CR && byte !== LF) {
        i += 1;
        continue;
      }
      // A CR at the end of what arrived may be the first half of a CRLF: wait for the next byte.
      if (byte === CR && i + 1 === head.length && !final) break;
      const width = byte === CR && head[i + 1] === LF ? 2 : 1;
      if (i === this.lineStart) {
        this.header = head.toString('latin1', 0, i);
        this.head = null;
        this.body.update(head.subarray(i + width));
        return;
      }
      i += width;
      this.lineStart = i;
    }
  }
}
