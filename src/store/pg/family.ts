import type { Family } from '../types.ts';
import type { KeyRange, PgKv } from './kv.ts';

/** A range read: all at once, or row by row (`next` gives undefined past the end; `close` ends it early). */
export interface RangeRead<T> extends AsyncIterable<T> {
  all(): Promise<T[]>;
  next(): Promise<T | undefined>;
  close(): Promise<void>;
}

/** The reads of one family, whatever holds it: a LevelDB sublevel, or PgFamily. */
export interface FamilyApi {
  /** What a raw LevelDB key of the family starts with ('' for a family in PostgreSQL). */
  readonly prefix: string;
  get(key: string): Promise<unknown>;
  getMany(keys: string[]): Promise<unknown[]>;
  keys(range?: KeyRange): RangeRead<string>;
  values(range?: KeyRange): RangeRead<unknown>;
  iterator(range?: KeyRange): RangeRead<[string, unknown]>;
  clear(): Promise<void>;
}

/** A family kept in PostgreSQL (PgKv), read as a LevelDB sublevel is: values are JSON. */
export class PgFamily implements FamilyApi {
  readonly prefix = '';

  constructor(
    private readonly kv: PgKv,
    readonly name: Family,
  ) {}

  async get(key: string): Promise<unknown> {
    const value = await this.kv.get(this.name, key);
    return value === undefined ? undefined : (JSON.parse(value) as unknown);
  }

  async getMany(keys: string[]): Promise<unknown[]> {
    return (await this.kv.getMany(this.name, keys)).map((v) => (v === undefined ? undefined : (JSON.parse(v) as unknown)));
  }

  keys(range: KeyRange = {}): RangeRead<string> {
    return this.read(range, ([key]) => key);
  }

  values(range: KeyRange = {}): RangeRead<unknown> {
    return this.read(range, ([, value]) => JSON.parse(value) as unknown);
  }

  iterator(range: KeyRange = {}): RangeRead<[string, unknown]> {
    return this.read(range, ([key, value]) => [key, JSON.parse(value)] as [string, unknown]);
  }

  clear(): Promise<void> {
    return this.kv.clear(this.name);
  }

  private read<T>(range: KeyRange, map: (row: [string, string]) => T): RangeRead<T> {
    const { kv, name } = this;
    let rows: AsyncGenerator<[string, string]> | null = null;
    return {
      async all() {
        const out: T[] = [];
        for await (const row of kv.rows(name, range)) out.push(map(row));
        return out;
      },
      async *[Symbol.asyncIterator]() {
        for await (const row of kv.rows(name, range)) yield map(row);
      },
      async next() {
        rows ??= kv.rows(name, range);
        const step = await rows.next();
        return step.done ? undefined : map(step.value);
      },
      async close() {
        await rows?.return(undefined);
      },
    };
  }
}
