/**
 * JSON text as a list of buffers, for documents too large to hold twice (a route payload of a
 * 25 MiB message): the bytes are exactly those of `Buffer.from(JSON.stringify(value), 'utf8')`,
 * but no string of the whole document is made, long strings are encoded a slice at a time, and
 * `JsonBytes` (bytes that are JSON already, such as a base64 string with its quotes) go in as
 * they are.
 */

/** Bytes that are a JSON value already, written as they are. */
export class JsonBytes {
  constructor(readonly parts: readonly Buffer[]) {}
}

/** Characters of a string encoded at a time; text between buffers is flushed past this too. */
const SLICE_CHARS = 256 * 1024;

export function jsonParts(value: unknown): Buffer[] {
  const out = new Parts();
  write(value, out);
  return out.end();
}

/** What JSON.stringify does, descending into arrays and plain objects so that their members can be written in slices. */
function write(value: unknown, out: Parts): void {
  if (value instanceof JsonBytes) out.bytes(value.parts);
  else if (typeof value === 'string') out.string(value);
  else if (Array.isArray(value)) {
    out.text('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.text(',');
      // As JSON.stringify: what has no JSON form is null inside an array.
      if (hasJsonForm(value[i])) write(value[i], out);
      else out.text('null');
    }
    out.text(']');
  } else if (isPlainObject(value)) {
    out.text('{');
    let first = true;
    // Object.keys has JSON.stringify's order (integer-like keys first).
    for (const key of Object.keys(value)) {
      const member = value[key];
      // As JSON.stringify: a member without a JSON form is left out.
      if (!hasJsonForm(member)) continue;
      out.text(`${first ? '' : ','}${JSON.stringify(key)}:`);
      first = false;
      write(member, out);
    }
    out.text('}');
  } else out.text(JSON.stringify(value));
}

function hasJsonForm(value: unknown): boolean {
  if (value instanceof JsonBytes || typeof value === 'string' || Array.isArray(value) || isPlainObject(value)) return true;
  return JSON.stringify(value) !== undefined;
}

/** An object JSON.stringify writes member by member: no toJSON, and Object's prototype (or none). */
function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return (proto === Object.prototype || proto === null) && typeof (value as { toJSON?: unknown }).toJSON !== 'function';
}

class Parts {
  private readonly parts: Buffer[] = [];
  private pending = '';

  text(text: string): void {
    this.pending += text;
    if (this.pending.length >= SLICE_CHARS) this.flush();
  }

  bytes(parts: readonly Buffer[]): void {
    this.flush();
    for (const part of parts) this.parts.push(part);
  }

  /**
   * A string, escaped a slice at a time: JSON.stringify escapes each code point alone, so the
   * slices' escapes joined are the whole string's, as long as no slice splits a surrogate pair.
   */
  string(text: string): void {
    if (text.length <= SLICE_CHARS) {
      this.text(JSON.stringify(text));
      return;
    }
    this.text('"');
    for (let at = 0; at < text.length;) {
      let end = Math.min(at + SLICE_CHARS, text.length);
      const last = text.charCodeAt(end - 1);
      if (end < text.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
      const escaped = JSON.stringify(text.slice(at, end));
      this.text(escaped.slice(1, -1));
      at = end;
    }
    this.text('"');
  }

  end(): Buffer[] {
    this.flush();
    return this.parts;
  }

  private flush(): void {
    if (this.pending === '') return;
    this.parts.push(Buffer.from(this.pending, 'utf8'));
    this.pending = '';
  }
}
