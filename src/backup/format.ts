import { createHash, type Hash } from 'node:crypto';

/**
 * The backup stream the daemon sends over its control socket (`postilion backup`): a magic
 * line, then frames of one type byte, a 32-bit big-endian length and the payload:
 *
 *   F  a key file: u16 path length, the path (relative to keys.dir, '/'-separated), u32 mode, the bytes
 *   R  records: repeated u32 key length, key, u32 value length, value (raw LevelDB keys and values)
 *   E  the end: the summary as JSON (counts and digests the receiver checks)
 *
 * A stream without its E frame was cut short and is not a backup.
 */
export const MAGIC = Buffer.from('POSTILION-BACKUP 1\n');
/** A records frame is closed once it holds this many bytes (one large value may pass it). */
export const RECORDS_FRAME_BYTES = 1024 * 1024;
/** The file a finished backup directory holds, written last: without it the directory is not a backup. */
export const MANIFEST = 'postilion-backup.json';
export const FORMAT = 'postilion-backup';
export const FORMAT_VERSION = 1;

export interface KeyFile {
  /** Relative to keys.dir, '/'-separated. */
  path: string;
  mode: number;
  data: Buffer;
}

export interface BackupSummary {
  format: typeof FORMAT;
  version: typeof FORMAT_VERSION;
  /** When the snapshot was taken. */
  created_at: string;
  /** The data and keys directories it was taken from. */
  source: { data_dir: string; keys_dir: string };
  records: number;
  /** SHA-256 over every record in key order (see RecordDigest). */
  records_sha256: string;
  files: Array<{ path: string; bytes: number; mode: string; sha256: string }>;
}

export type Frame = { type: 'file'; file: KeyFile } | { type: 'records'; entries: Array<[Buffer, Buffer]> } | { type: 'end'; summary: BackupSummary };

/** SHA-256 over records in key order, each as its key's and value's lengths and bytes. */
export class RecordDigest {
  private readonly hash: Hash = createHash('sha256');
  count = 0;

  add(key: Buffer, value: Buffer): void {
    const lengths = Buffer.alloc(8);
    lengths.writeUInt32BE(key.length, 0);
    lengths.writeUInt32BE(value.length, 4);
    this.hash.update(lengths).update(key).update(value);
    this.count += 1;
  }

  hex(): string {
    return this.hash.copy().digest('hex');
  }
}

export function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A key file's path as the stream carries it: relative, '/'-separated, never leaving keys.dir. */
export function isSafePath(path: string): boolean {
  if (path.length === 0 || path.length > 1024 || path.startsWith('/') || path.includes('\\') || path.includes('\u0000')) return false;
  return path.split('/').every((part) => part !== '' && part !== '.' && part !== '..');
}

function frame(type: 'F' | 'R' | 'E', payload: Buffer[]): Buffer {
  const length = payload.reduce((sum, b) => sum + b.length, 0);
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeUInt32BE(length, 1);
  return Buffer.concat([head, ...payload], 5 + length);
}

export function encodeFile(file: KeyFile): Buffer {
  const path = Buffer.from(file.path, 'utf8');
  const head = Buffer.alloc(2 + path.length + 4);
  head.writeUInt16BE(path.length, 0);
  path.copy(head, 2);
  head.writeUInt32BE(file.mode, 2 + path.length);
  return frame('F', [head, file.data]);
}

export function encodeRecords(entries: ReadonlyArray<readonly [Buffer, Buffer]>): Buffer {
  const parts: Buffer[] = [];
  for (const [key, value] of entries) {
    const k = Buffer.alloc(4);
    k.writeUInt32BE(key.length, 0);
    const v = Buffer.alloc(4);
    v.writeUInt32BE(value.length, 0);
    parts.push(k, key, v, value);
  }
  return frame('R', parts);
}

export function encodeEnd(summary: BackupSummary): Buffer {
  return frame('E', [Buffer.from(JSON.stringify(summary), 'utf8')]);
}

/** Collects exact byte counts from a stream of chunks, copying each byte once. */
class ByteReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private done = false;

  constructor(private readonly source: AsyncIterator<Buffer>) {}

  /** `n` bytes, or null when the stream ends first (at its very end with nothing read: `atEnd`). */
  async read(n: number): Promise<Buffer | null> {
    while (this.buffered < n && !this.done) {
      const next = await this.source.next();
      if (next.done) this.done = true;
      else {
        const chunk = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value);
        this.chunks.push(chunk);
        this.buffered += chunk.length;
      }
    }
    if (this.buffered < n) return null;
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered = rest.length;
    return out;
  }
}

/** The stream is not a whole backup (cut short, or not a backup at all). */
export class BackupStreamError extends Error {
  override name = 'BackupStreamError';
}

/** The frames of a backup stream, checked as they come; throws BackupStreamError on anything else. */
export async function* decodeFrames(source: AsyncIterable<Buffer>): AsyncGenerator<Frame> {
  const reader = new ByteReader(source[Symbol.asyncIterator]());
  const magic = await reader.read(MAGIC.length);
  if (!magic || !magic.equals(MAGIC)) throw new BackupStreamError('the stream is not a Postilion backup');
  for (;;) {
    const head = await reader.read(5);
    if (!head) throw new BackupStreamError('the backup stream ended before its end frame (cut short)');
    const type = head.toString('latin1', 0, 1);
    const length = head.readUInt32BE(1);
    const payload = await reader.read(length);
    if (!payload) throw new BackupStreamError('the backup stream ended inside a frame (cut short)');
    switch (type) {
      case 'F':
        yield { type: 'file', file: decodeFile(payload) };
        break;
      case 'R':
        yield { type: 'records', entries: decodeRecords(payload) };
        break;
      case 'E': {
        yield { type: 'end', summary: JSON.parse(payload.toString('utf8')) as BackupSummary };
        if (await reader.read(1)) throw new BackupStreamError('bytes after the end frame');
        return;
      }
      default:
        throw new BackupStreamError(`unknown frame type ${JSON.stringify(type)}`);
    }
  }
}

function decodeFile(payload: Buffer): KeyFile {
  const pathLength = payload.readUInt16BE(0);
  const path = payload.toString('utf8', 2, 2 + pathLength);
  if (!isSafePath(path)) throw new BackupStreamError(`a key file path leaves keys.dir: ${JSON.stringify(path.slice(0, 200))}`);
  return { path, mode: payload.readUInt32BE(2 + pathLength), data: payload.subarray(6 + pathLength) };
}

function decodeRecords(payload: Buffer): Array<[Buffer, Buffer]> {
  const entries: Array<[Buffer, Buffer]> = [];
  let at = 0;
  const take = (): Buffer => {
    if (at + 4 > payload.length) throw new BackupStreamError('a records frame is malformed');
    const n = payload.readUInt32BE(at);
    if (at + 4 + n > payload.length) throw new BackupStreamError('a records frame is malformed');
    const out = payload.subarray(at + 4, at + 4 + n);
    at += 4 + n;
    return out;
  };
  while (at < payload.length) entries.push([take(), take()]);
  return entries;
}
