import type { MessagesRepo } from '../store/messages-repo.ts';
import type { Store } from '../store/store.ts';
import { newId } from '../util/ids.ts';
import { badRequest } from '../util/errors.ts';
import type { Readable } from 'node:stream';

/** Messages up to this size are kept in memory and stored in their acceptance's one batch. */
export const SPOOL_AFTER_BYTES = 1024 * 1024;
/** Body bytes per chunk written while a large message arrives (each its own synced batch). */
const CHUNK_BYTES = 1024 * 1024;

/** A large message written to the store as it arrived: its header block, and where its body is. */
export interface SpooledMessage {
  /** The header block, up to and including the empty line. */
  head: Buffer;
  bodyId: string;
  /** Body chunks written, at indices 1 to `written`. */
  written: number;
  /** The rest of the body, for the acceptance's batch. */
  tail: Buffer[];
  size: number;
}

/**
 * Takes the DATA of a message as it arrives (submission and the inbound MX). Up to SPOOL_AFTER_BYTES it stays in memory (the
 * common case: one batch, and delivery finds the body in memory). Past that the header block is
 * kept (it must end within the first MiB) and the body is written to the store in synced chunks
 * of 1 MiB as it comes, bare LF line ends made CRLF, so a 25 MiB message never sits whole in
 * memory. Whatever was written is deleted when the message is not accepted.
 */
export class DataSpool {
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  private size = 0;
  private spooled: { head: Buffer; bodyId: string; written: number; lfOnly: boolean | null; lastWasCr: boolean } | null = null;
  private done = false;
  /** The chunk write under way, which a discard waits for. */
  private writing: Promise<void> | null = null;

  constructor(
    private readonly store: Store,
    private readonly repo: MessagesRepo,
  ) {}

  /** Whether neither finish() nor discard() was called: a session that ends now must discard it. */
  get unsettled(): boolean {
    return !this.done;
  }

  /**
   * Adds received bytes: null when nothing is to be written, else the write of the chunks they
   * completed (the caller holds the client until it is done). Throws on a header block over 1 MiB.
   */
  add(chunk: Buffer): Promise<void> | null {
    if (this.done) return null;
    this.size += chunk.length;
    if (!this.spooled) {
      this.buffered.push(chunk);
      this.bufferedBytes += chunk.length;
      if (this.bufferedBytes <= SPOOL_AFTER_BYTES) return null;
      const all = Buffer.concat(this.buffered, this.bufferedBytes);
      const end = bodyStart(all);
      if (end < 0) throw badRequest('the header block is larger than 1 MiB');
      this.spooled = { head: all.subarray(0, end), bodyId: newId(), written: 0, lfOnly: null, lastWasCr: false };
      this.buffered = [];
      this.bufferedBytes = 0;
      chunk = all.subarray(end);
    }
    const s = this.spooled;
    if (s.lfOnly === null && chunk.length > 0) s.lfOnly = chunk.includes('\n') && !chunk.includes('\r\n');
    const bytes = s.lfOnly ? bareLfToCrlf(chunk, s.lastWasCr) : chunk;
    if (chunk.length > 0) s.lastWasCr = chunk[chunk.length - 1] === 0x0d;
    this.buffered.push(bytes);
    this.bufferedBytes += bytes.length;
    if (this.bufferedBytes >= CHUNK_BYTES) {
      const all = Buffer.concat(this.buffered, this.bufferedBytes);
      const ops = [];
      let at = 0;
      for (; all.length - at >= CHUNK_BYTES; at += CHUNK_BYTES) ops.push(this.repo.spoolChunk(s.bodyId, ++s.written, all.subarray(at, at + CHUNK_BYTES)));
      this.buffered = at < all.length ? [all.subarray(at)] : [];
      this.bufferedBytes = all.length - at;
      this.writing = this.store.commit(ops);
      return this.writing;
    }
    return null;
  }

  /** The whole message when it stayed small, else where the spooled one is. */
  finish(): { raw: Buffer } | { spooled: SpooledMessage } {
    this.done = true;
    if (!this.spooled) return { raw: Buffer.concat(this.buffered, this.bufferedBytes) };
    const { head, bodyId, written } = this.spooled;
    return { spooled: { head, bodyId, written, tail: this.bufferedBytes > 0 ? [Buffer.concat(this.buffered, this.bufferedBytes)] : [], size: this.size } };
  }

  /**
   * Deletes what was written (the message was refused, too big, could not be stored, or its
   * connection was lost before the end of DATA).
   */
  async discard(): Promise<void> {
    this.done = true;
    this.buffered = [];
    this.bufferedBytes = 0;
    await this.writing?.catch(() => undefined);
    if (!this.spooled || this.spooled.written === 0) return;
    const ops = await this.repo.dropChunks(this.spooled.bodyId);
    if (ops.length > 0) await this.store.commit(ops);
  }
}

/** Bare LF line ends become CRLF; `afterCr`: the previous chunk ended with CR (its LF is not bare). */
export function bareLfToCrlf(chunk: Buffer, afterCr: boolean): Buffer {
  const text = chunk.toString('latin1');
  let out = text.replace(/(?<!\r)\n/g, '\r\n');
  if (afterCr && text.startsWith('\n')) out = `\n${out.slice(2)}`;
  return Buffer.from(out, 'latin1');
}

/** Where the body starts (after the empty line), or -1 when the header block does not end here. */
function bodyStart(raw: Buffer): number {
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return crlf + 4;
  if (lf >= 0) return lf + 2;
  return -1;
}

/**
 * Reads a DATA stream into the spool, holding the client while a chunk is written: the whole
 * message when small, else where the spooled one is; null once over `limit` (the rest is read and
 * dropped). The first failure is answered once the client has sent all its data.
 */
export function receiveData(stream: Readable & { sizeExceeded?: boolean }, limit: number, spool: DataSpool): Promise<Buffer | SpooledMessage | null> {
  return new Promise((resolve, reject) => {
    let size = 0;
    let failure: Error | null = null;
    let writing: Promise<void> = Promise.resolve();
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit || failure !== null) return;
      let write: Promise<void> | null;
      try {
        write = spool.add(chunk);
      } catch (err) {
        failure = err as Error;
        return;
      }
      if (!write) return;
      // A chunk is being written: the client waits (the stream is resumed once it is on disk).
      stream.pause();
      writing = write.then(
        () => void stream.resume(),
        (err: Error) => {
          failure = err;
          stream.resume();
        },
      );
    });
    stream.on('end', () => {
      void writing.then(() => {
        if (failure !== null) return reject(failure);
        if (stream.sizeExceeded || size > limit) return resolve(null);
        const done = spool.finish();
        resolve('raw' in done ? done.raw : done.spooled);
      });
    });
    stream.on('error', reject);
  });
}
