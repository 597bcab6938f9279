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
    const scan = new Scan(part);
    const at = scan.next(0, this.last);
    const out = at < 0 ? part : rewrite(part, scan, this.last, at);
    this.last = part[part.length - 1]!;
    return out;
  }

  /** The terminating dot line, closing the last line first if the message did not end one. */
  end(): Buffer {
    return this.last === LF ? DOT_CRLF : this.last === CR ? LF_DOT_CRLF : CRLF_DOT_CRLF;
  }
}

/**
 * Finds where a part needs a byte inserted, from line end to line end with Buffer.indexOf: the
 * positions nodemailer's DataStream would find with its byte loop, in the same order.
 */
class Scan {
  /** The first CR at or after the last look-up; Infinity: none left. */
  private cr = -1;
  constructor(private readonly part: Buffer) {}

  /**
   * The first index ≥ `start` before which a byte goes in, or -1; `before`: the byte before
   * `start` (START at the beginning of the data). A CR as the part's last byte is settled by
   * the next part (or by end()).
   */
  next(start: number, before: number): number {
    const part = this.part;
    const length = part.length;
    if (start >= length) return -1;
    const first = part[start]!;
    if (before === CR && first !== LF) return start;
    if (first === DOT && (before === LF || before === START)) return start;
    let from = start;
    let lf = part.indexOf(LF, start);
    while (lf >= 0) {
      if (lf === start) {
        if (before !== CR) return start;
      } else {
        // the first CR from the line's start must be the one ending it: an earlier one is bare
        const cr = this.crFrom(from);
        if (cr < lf - 1) return cr + 1;
        if (part[lf - 1] !== CR) return lf;
      }
      if (lf + 1 < length && part[lf + 1] === DOT) return lf + 1;
      from = lf + 1;
      lf = part.indexOf(LF, from);
    }
    const cr = this.crFrom(from);
    return cr < length - 1 ? cr + 1 : -1;
  }

  /** The first CR at or after `from` (Infinity: none), looked up again only once passed. */
  private crFrom(from: number): number {
    if (this.cr < from) {
      const at = this.part.indexOf(CR, from);
      this.cr = at < 0 ? Infinity : at;
    }
    return this.cr;
  }
}

/** The part with a byte inserted before `at` and each later position that needs one. */
function rewrite(part: Buffer, scan: Scan, last: number, at: number): Buffer {
  const pieces: Buffer[] = [];
  let start = 0;
  for (let i = at; i >= 0; i = scan.next(i + 1, part[i]!)) {
    const byte = part[i]!;
    const prev = i > 0 ? part[i - 1]! : last;
    if (i > start) pieces.push(part.subarray(start, i));
    if (prev === CR && byte !== LF) pieces.push(byte === DOT ? LF_DOT : LF_ONLY);
    else if (byte === LF) pieces.push(CR_ONLY);
    else pieces.push(DOT_ONLY);
    start = i;
  }
  pieces.push(part.subarray(start));
  return Buffer.concat(pieces);
}

const LF_ONLY = Buffer.from('\n');
const LF_DOT = Buffer.from('\n.');
const CR_ONLY = Buffer.from('\r');
const DOT_ONLY = Buffer.from('.');
