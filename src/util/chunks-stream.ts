import { Readable } from 'node:stream';

/**
 * Buffers already in memory as one byte stream, without copying them (a message's parts, a
 * stored body's chunks). A stream is read once: make one per reader.
 */
export function chunksStream(chunks: readonly Buffer[]): Readable {
  let next = 0;
  return new Readable({
    read() {
      while (next < chunks.length) if (!this.push(chunks[next++])) return;
      this.push(null);
    },
  });
}
