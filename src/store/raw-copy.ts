import { Level } from 'level';

/**
 * A LevelDB written or read as raw keys and values, past the families and their encodings: a
 * copy of a store (Store.snapshot()) made into a store of its own, byte for byte, and read back
 * to check it. Nothing else of Postilion opens it while this does.
 */
type RawDb = Level<Buffer, Buffer>;

const RAW = { keyEncoding: 'buffer', valueEncoding: 'buffer' } as const;

export interface RawStoreWriter {
  put(entries: ReadonlyArray<readonly [Buffer, Buffer]>): Promise<void>;
  /** The last batch synced, then closed: the copy is on disk. */
  close(): Promise<void>;
}

/** A new LevelDB at `dir` (which must not hold one), written in batches. */
export async function createRawStore(dir: string): Promise<RawStoreWriter> {
  const db: RawDb = new Level<Buffer, Buffer>(dir, { ...RAW, createIfMissing: true, errorIfExists: true });
  await db.open();
  return {
    put: (entries) => db.batch(entries.map(([key, value]) => ({ type: 'put' as const, key, value }))),
    close: async () => {
      // A synced write of nothing-changed makes LevelDB sync its log: the batches before it are on disk.
      const marker = Buffer.from('\u0000postilion-raw-copy');
      await db.put(marker, Buffer.alloc(0), { sync: true });
      await db.del(marker, { sync: true });
      await db.close();
    },
  };
}

/** Every record of the LevelDB at `dir`, raw, in key order, in chunks. */
export async function* readRawStore(dir: string, chunk = 256): AsyncGenerator<Array<[Buffer, Buffer]>> {
  const db: RawDb = new Level<Buffer, Buffer>(dir, { ...RAW, createIfMissing: false });
  await db.open();
  try {
    const it = db.iterator();
    try {
      for (;;) {
        const batch = await it.nextv(chunk);
        if (batch.length === 0) return;
        yield batch;
      }
    } finally {
      await it.close();
    }
  } finally {
    await db.close();
  }
}
