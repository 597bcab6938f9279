import type { WriteOp } from './group-commit.ts';
import type { InboundRecord } from './records.ts';
import type { Store } from './store.ts';
import { idFloor } from '../util/ids.ts';

/**
 * Inbound messages: `r:<id>` the record (ids are UUIDv7: in time order, for the retention purge),
 * `p:<id>` for those with a bounce or complaint not yet taken in; their bytes in `bodies` under
 * `<bodyId>:<index>`.
 */
export class InboundRepo {
  constructor(private readonly store: Store) {}

  get(id: string): Promise<InboundRecord | undefined> {
    return this.store.get<InboundRecord>('inbound', `r:${id}`);
  }

  put(record: InboundRecord): WriteOp[] {
    const ops: WriteOp[] = [{ type: 'put', family: 'inbound', key: `r:${record.id}`, value: record }];
    ops.push(
      record.state === 'pending'
        ? { type: 'put', family: 'inbound', key: `p:${record.id}`, value: record.id }
        : { type: 'del', family: 'inbound', key: `p:${record.id}` },
    );
    return ops;
  }

  /** Ops taking a record off the pending list (its record is gone). */
  dropPending(id: string): WriteOp[] {
    return [{ type: 'del', family: 'inbound', key: `p:${id}` }];
  }

  /** Ids of records with something still to take in. */
  async pending(limit: number): Promise<string[]> {
    return (await this.store.families.inbound.values({ gt: 'p:', lt: 'p:\xff', limit }).all()) as string[];
  }

  /**
   * Ops storing a message's chunks; with `spooled` chunks already written (at indices 1 to
   * `spooled`), chunks[0] goes first and the others after them.
   */
  chunkOps(bodyId: string, chunks: Buffer[], spooled: number): WriteOp[] {
    return chunks.map((bytes, i) => ({
      type: 'put',
      family: 'bodies',
      key: `${bodyId}:${(i === 0 ? 0 : i + spooled).toString().padStart(6, '0')}`,
      value: bytes,
    }));
  }

  /** The message's bytes, chunk by chunk. */
  async *body(bodyId: string): AsyncGenerator<Buffer> {
    for await (const chunk of this.store.families.bodies.values({ gt: `${bodyId}:`, lt: `${bodyId}:\xff` })) yield chunk as Buffer;
  }

  /** The first `limit` bytes of the message (a bounce or report is read no further). */
  async head(bodyId: string, limit: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    let size = 0;
    for await (const chunk of this.body(bodyId)) {
      parts.push(chunk);
      size += chunk.length;
      if (size >= limit) break;
    }
    return Buffer.concat(parts).subarray(0, limit);
  }

  /** Ops deleting a body's chunks. */
  async dropBody(bodyId: string): Promise<WriteOp[]> {
    const keys = await this.store.families.bodies.keys({ gt: `${bodyId}:`, lt: `${bodyId}:\xff` }).all();
    return keys.map((key) => ({ type: 'del', family: 'bodies', key }));
  }

  /** Deletes records received before `beforeMs`, with their bodies; returns how many. */
  async purgeBefore(beforeMs: number): Promise<number> {
    let purged = 0;
    for (;;) {
      const old = (await this.store.families.inbound.values({ gt: 'r:', lt: `r:${idFloor(beforeMs)}`, limit: 200 }).all()) as InboundRecord[];
      if (old.length === 0) return purged;
      const ops: WriteOp[] = [];
      for (const r of old)
        ops.push(
          { type: 'del', family: 'inbound', key: `r:${r.id}` },
          { type: 'del', family: 'inbound', key: `p:${r.id}` },
          ...(await this.dropBody(r.bodyId)),
        );
      await this.store.commit(ops);
      purged += old.length;
    }
  }
}
