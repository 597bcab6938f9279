import { DkimMessageReader } from '../domains/dkim-canonical.ts';

/**
 * What DKIM signing needs of a stored body. A body is shared by the messages of its recipients,
 * sent again by each retry, and never changes under its id: this is worked out once per body.
 */
export interface BodyDigest {
  /** Bytes at its start that are header fields (relayed mail stores its whole header block there). */
  headerBytes: number;
  /** The relaxed body hash (`bh=`) of what follows the header block. */
  bodyHash: string;
}

/** A message as DKIM signs it: its header block (latin1) and its relaxed body hash. */
export interface DkimView {
  header: string;
  bodyHash: string;
}

/** Digests kept (about 150 bytes each). */
const DEFAULT_LIMIT = 10_000;

/** A body's digest: its bytes read once, as DKIM reads a message. */
export function digestOf(chunks: readonly Buffer[]): BodyDigest {
  const reader = new DkimMessageReader();
  for (const chunk of chunks) reader.update(chunk);
  const { header, bodyHash } = reader.end();
  // latin1: one character per byte.
  return { headerBytes: header.length, bodyHash };
}

/** The digests of recent bodies, by body id; past `limit`, the least recently used goes. */
export class BodyDigests {
  private readonly kept = new Map<string, BodyDigest>();

  constructor(
    private readonly limit = DEFAULT_LIMIT,
    private readonly digest: (chunks: readonly Buffer[]) => BodyDigest = digestOf,
  ) {}

  /**
   * The header block and body hash of a message sent as `head` followed by the body. When the
   * head is whole header lines (To and Message-ID of composed mail, or nothing for relayed
   * mail), the message's header block is the head then the body's header part, and its body is
   * the rest of the body: the body's digest serves every message of it. Any other head has the
   * message read whole, as the signer reads one.
   */
  view(bodyId: string, head: Buffer, body: readonly Buffer[]): DkimView {
    if (!wholeHeaderLines(head)) {
      const reader = new DkimMessageReader().update(head);
      for (const chunk of body) reader.update(chunk);
      return reader.end();
    }
    const digest = this.of(bodyId, body);
    return { header: head.toString('latin1') + latin1Prefix(body, digest.headerBytes), bodyHash: digest.bodyHash };
  }

  private of(bodyId: string, body: readonly Buffer[]): BodyDigest {
    const known = this.kept.get(bodyId);
    if (known) {
      this.kept.delete(bodyId);
      this.kept.set(bodyId, known);
      return known;
    }
    const digest = this.digest(body);
    if (this.kept.size >= this.limit) this.kept.delete(this.kept.keys().next().value!);
    this.kept.set(bodyId, digest);
    return digest;
  }
}

const CR = 0x0d;
const LF = 0x0a;

/**
 * Whether `head` is nothing, or header lines each ended by a line end, none of them empty: then
 * the header block goes on into the body, wherever the body's own empty line is.
 */
function wholeHeaderLines(head: Buffer): boolean {
  if (head.length === 0) return true;
  if (head[head.length - 1] !== LF) return false;
  // A line end at the start, or right after another, is the empty line that ends the header block.
  let lineStart = 0;
  for (let i = 0; i < head.length; i++) {
    const byte = head[i]!;
    if (byte !== CR && byte !== LF) continue;
    if (i === lineStart) return false;
    if (byte === CR && head[i + 1] === LF) i += 1;
    lineStart = i + 1;
  }
  return true;
}

/** The first `bytes` bytes of the chunks as latin1 text. */
function latin1Prefix(chunks: readonly Buffer[], bytes: number): string {
  let text = '';
  let left = bytes;
  for (const chunk of chunks) {
    if (left <= 0) break;
    const take = Math.min(left, chunk.length);
    text += chunk.toString('latin1', 0, take);
    left -= take;
  }
  return text;
}
