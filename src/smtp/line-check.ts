import { Transform, type Readable, type TransformCallback } from 'node:stream';

/** Octets of a line without its CRLF (RFC 5321 §4.5.3.1.6: 1,000 with it; RFC 5322 §2.1.1). */
export const MAX_LINE_OCTETS = 998;

/**
 * A stage of the DATA path of both listeners: passes the message through as it comes (the
 * chunks themselves, never copied) while it watches for what may not be forwarded as received:
 * a line longer than 998 octets plus CRLF, and a NUL octet (RFC 5322 §2.3 and RFC 6152 §3
 * exclude NUL from 7bit and 8bit mail alike; BINARYMIME is not offered).
 *
 * The message is refused (`problem` says why), not rewritten: folding a header or splitting a
 * body line changes what the sender wrote (and breaks its DKIM signature), and dropping NULs
 * changes binary content that was never allowed on the wire. A sender told 554 5.6.0 at once
 * knows, where a silently altered message would not. Once a problem is found the rest of the
 * message is read and dropped: nothing more is stored of a message that is refused anyway.
 */
export class LineCheck extends Transform {
  /** Why the message may not be forwarded, once found. */
  problem: string | null = null;
  /** Octets of the current line so far (a CR included), and its number from 1. */
  private lineOctets = 0;
  private line = 1;
  private lastWasCr = false;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (this.problem === null) this.inspect(chunk);
    if (this.problem === null) this.push(chunk);
    done();
  }

  private inspect(chunk: Buffer): void {
    const nul = chunk.indexOf(0);
    let start = 0;
    for (;;) {
      const lf = chunk.indexOf(0x0a, start);
      const end = lf < 0 ? chunk.length : lf;
      if (nul >= start && nul < end) {
        this.problem = `Message refused: line ${this.line} contains a NUL octet, which mail may not carry (RFC 5322 §2.3)`;
        return;
      }
      this.lineOctets += end - start;
      if (lf < 0) {
        if (end > start) this.lastWasCr = chunk[end - 1] === 0x0d;
        // Past 999 octets the line is too long even if a CR comes next.
        if (this.lineOctets > MAX_LINE_OCTETS + 1) this.tooLong();
        return;
      }
      const cr = end > start ? chunk[end - 1] === 0x0d : this.lastWasCr;
      if (this.lineOctets - (cr ? 1 : 0) > MAX_LINE_OCTETS) {
        this.tooLong();
        return;
      }
      this.lineOctets = 0;
      this.lastWasCr = false;
      this.line += 1;
      start = lf + 1;
    }
  }

  private tooLong(): void {
    this.problem = `Message refused: line ${this.line} is longer than ${MAX_LINE_OCTETS} octets plus CRLF (RFC 5321 §4.5.3.1.6)`;
  }
}

/** `stream` through a LineCheck; an error of `stream` (the client left) ends the check with it. */
export function checkLines(stream: Readable): LineCheck {
  const check = new LineCheck();
  stream.once('error', (err) => check.destroy(err));
  return stream.pipe(check);
}
