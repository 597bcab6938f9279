/**
 * An append-only byte buffer for composing a message in one pass: grows by doubling, and hands
 * the result back cut into chunks of the size the store keeps.
 */
export class MimeWriter {
  private buf: Buffer;
  private length = 0;

  constructor(sizeHint: number) {
    this.buf = Buffer.allocUnsafe(Math.max(sizeHint, 1024));
  }

  get size(): number {
    return this.length;
  }

  /** Text of code points below 0x80 (line breaks, encoded output, ASCII headers). */
  ascii(text: string): void {
    this.reserve(text.length);
    this.length += this.buf.write(text, this.length, 'latin1');
  }

  /** A soft line break of quoted-printable ("=" CRLF). */
  softBreak(): void {
    this.reserve(3);
    const buf = this.buf;
    buf[this.length] = 0x3d;
    buf[this.length + 1] = 0x0d;
    buf[this.length + 2] = 0x0a;
    this.length += 3;
  }

  /** Text in UTF-8 (a header may keep an SMTPUTF8 address as it is). */
  utf8(text: string): void {
    this.reserve(Buffer.byteLength(text, 'utf8'));
    this.length += this.buf.write(text, this.length, 'utf8');
  }

  copy(source: Buffer, start: number, end: number): void {
    this.reserve(end - start);
    if (end - start > 128) {
      this.length += source.copy(this.buf, this.length, start, end);
      return;
    }
    // An encoded line at a time: a plain loop costs less than the native call of Buffer.copy.
    const buf = this.buf;
    let at = this.length;
    for (let i = start; i < end; i++) buf[at++] = source[i]!;
    this.length = at;
  }

  /** The bytes written, as `chunkBytes`-sized pieces (the last one shorter) of one exact-size Buffer. */
  chunks(chunkBytes: number): Buffer[] {
    const all = Buffer.from(this.buf.subarray(0, this.length));
    const out: Buffer[] = [];
    for (let offset = 0; offset < all.length; offset += chunkBytes) out.push(all.subarray(offset, Math.min(offset + chunkBytes, all.length)));
    return out;
  }

  private reserve(more: number): void {
    if (this.length + more <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + more));
    this.buf.copy(grown, 0, 0, this.length);
    this.buf = grown;
  }
}
