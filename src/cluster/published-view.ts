import { PgFamily, type FamilyApi } from '../store/pg/family.ts';
import type { PgKv } from '../store/pg/kv.ts';
import type { StoreAccess } from '../store/store.ts';
import { FAMILIES, type Family } from '../store/types.ts';

/** A write through the published view: only the publication writes there, in its own transaction. */
export class ReadOnlyViewError extends Error {
  override name = 'ReadOnlyViewError';
  constructor() {
    super('the published records are read-only: a node changes them only by publishing its events (cluster/publisher.ts)');
  }
}

/**
 * Cluster mode: what every node published (the `published` table), seen as a store is seen, so
 * that the repositories read it as they read a node's own store: MessagesRepo over it lists and
 * gets the messages of every node, and its ops are what the publication writes (through PgKv,
 * in its transaction). Nothing is cached: another node's publication is read as soon as it is
 * committed. Writes are refused.
 */
export class PublishedView implements StoreAccess {
  readonly families: Record<Family, FamilyApi>;

  constructor(published: PgKv) {
    this.families = Object.fromEntries(FAMILIES.map((name) => [name, new PgFamily(published, name)])) as unknown as Record<Family, FamilyApi>;
  }

  async get<T>(family: Family, key: string): Promise<T | undefined> {
    return (await this.families[family].get(key)) as T | undefined;
  }

  async getMany<T>(family: Family, keys: readonly string[]): Promise<Array<T | undefined>> {
    if (keys.length === 0) return [];
    return (await this.families[family].getMany([...keys])) as Array<T | undefined>;
  }

  commit(): Promise<void> {
    return Promise.reject(new ReadOnlyViewError());
  }

  onPut(): void {
    throw new ReadOnlyViewError();
  }
}
