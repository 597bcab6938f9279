const CR = 0x0d;
const LF = 0x0a;
const DOT = 0x2e;
/** The "last byte" before the first part: the start of the data is the start of a line. */
const START = -1;

const CRLF_DOT_CRLF = Buffer.from('\r\n.\r\n');
const LF_DOT_CRLF = Buffer.from('\n.\r\n');
const DOT_CRLF = Buffer.from('.\r\n');

/**
 * The content of DATA for a message given in parts (RFC 5321 §4.5.2): every line end CRLF (a bare
 * CR or LF becomes CRLF, so that no receiver can read "\r.\r" as the end of the data: SMTP
 * smuggling), a dot at the start of a line doubled, and the terminating dot line, as nodemailer's
 * DataStream makes it. A part is checked with Buffer.indexOf from line end to line end and handed
 * back as it is when nothing needs changing, which is the rule for mail we composed; only a part
 * that needs a change is copied.
 */
export class DataEncoder {
  /** The last byte of the previous part (line ends and dots at a part's start depend on it). */
  private last = START;

  /** The part as it goes on the wire. */
  encode(part: Buffer): Buffer {
    if (part.length === 0) return part;
    const at = firstChange(part, this.last);
    const out = at < 0 ? part : rewrite(part, this.last, at);
    this.last = part[part.length - 1]!;
    return out;
  }

  /** The terminating dot line, closing the last line first if the message did not end one. */
  end(): Buffer {
    return this.last === LF ? DOT_CRLF : this.last === CR ? LF_DOT_CRLF : CRLF_DOT_CRLF;
  }
}

/**
 * The index of the first byte before which something must be inserted, or -1. A CR as the last
 * byte is settled by the next part (or by end()).
 */
function firstChange(part: Buffer, last: number): number {
  const first = part[0]!;
  if (last === CR && first !== LF) return 0;
  if (first === DOT && (last === LF || last === START)) return 0;
  const length = part.length;
  let from = 0;
  let lf = part.indexOf(LF);
  while (lf >= 0) {
    if (lf === 0) {
      if (last !== CR) return 0;
    } else {
      // the first CR from the line's start must be the one ending it: an earlier one is bare
      const cr = part.indexOf(CR, from);
      if (cr >= 0 && cr < lf - 1) return cr + 1;
      if (part[lf - 1] !== CR) return lf;
    }
    if (lf + 1 < length && part[lf + 1] === DOT) return lf + 1;
    from = lf + 1;
    lf = part.indexOf(LF, from);
  }
  const cr = part.indexOf(CR, from);
  return cr >= 0 && cr < length - 1 ? cr + 1 : -1;
}

/** The part with its line ends fixed and dots stuffed, from `at` on (nothing before it changes). */
function rewrite(part: Buffer, last: number, at: number): Buffer {
  const pieces: Buffer[] = [];
  let start = 0;
  for (let i = at; i < part.length; i++) {
    const byte = part[i]!;
    const prev = i > 0 ? part[i - 1]! : last;
    let insert: Buffer | null = null;
    if (prev === CR && byte !== LF) insert = byte === DOT ? LF_DOT : LF_ONLY;
    else if (byte === LF && prev !== CR) insert = CR_ONLY;
    else if (byte === DOT && (prev === LF || prev === START)) insert = DOT_ONLY;
    if (insert) {
      if (i > start) pieces.push(part.subarray(start, i));
      pieces.push(insert);
      start = i;
    }
  }
  pieces.push(part.subarray(start));
  return Buffer.concat(pieces);
}

const LF_ONLY = Buffer.from('\n');
const LF_DOT = Buffer.from('\n.');
const CR_ONLY = Buffer.from('\r');
const DOT_ONLY = Buffer.from('.');
