import type { WriteOp } from './group-commit.ts';
import type { Store } from './store.ts';

/** The store layout this release writes. 1: no version recorded, due-time keys `<time>:<message id>`;
 * 2: due-time keys `<kind>:<time>:<id>`; 3: statistics counters; 4: a new HTTP job kept in its
 * due-time entry (the entry's value is the record, not its id: store/jobs-repo.ts). */
export const SCHEMA_VERSION = 4;

/** Migration steps that need more than the store (given by the caller, which owns them). */
export interface MigrationSteps {
  /** 2 → 3: builds the statistics counters from the stored messages; how many it counted. */
  buildCounters(): Promise<number>;
}

export class SchemaError extends Error {}

/**
 * The `meta` family: the schema version, each event consumer's cursor, and the destinations the
 * operator suspended.
 */
export class MetaRepo {
  constructor(private readonly store: Store) {}

  async schemaVersion(): Promise<number> {
    return (await this.store.get<number>('meta', 'schema')) ?? 1;
  }

  /** The id of the last event the consumer has dealt with, or null when it has none yet. */
  async cursor(consumer: string): Promise<string | null> {
    return (await this.store.get<string>('meta', `cursor:${consumer}`)) ?? null;
  }

  /** Written in the same batch as what the consumer made of the events up to `eventId`. */
  setCursor(consumer: string, eventId: string): WriteOp {
    return { type: 'put', family: 'meta', key: `cursor:${consumer}`, value: eventId };
  }

  async suspended(): Promise<Map<string, { since: string; by: string }>> {
    const out = new Map<string, { since: string; by: string }>();
    for await (const [key, value] of this.store.families.meta.iterator({ gt: 'suspended:', lt: 'suspended:\xff' })) {
      out.set(key.slice('suspended:'.length), value as { since: string; by: string });
    }
    return out;
  }

  suspend(destination: string, since: string, by: string): Promise<void> {
    return this.store.commit([{ type: 'put', family: 'meta', key: `suspended:${destination}`, value: { since, by } }]);
  }

  resume(destination: string): Promise<void> {
    return this.store.commit([{ type: 'del', family: 'meta', key: `suspended:${destination}` }]);
  }
}

/**
 * Brings a data directory written by an earlier release to SCHEMA_VERSION, one synced batch per
 * step, before anything else reads it; refuses one written by a newer release. An empty store (a
 * new data directory) is written at SCHEMA_VERSION at once. Returns the steps taken, for the log.
 */
export async function migrate(store: Store, hooks: MigrationSteps): Promise<string[]> {
  const meta = new MetaRepo(store);
  const found = await meta.schemaVersion();
  if (found > SCHEMA_VERSION) {
    throw new SchemaError(
      `the data directory ${store.dir} was written by a newer release (store schema ${found}; this release knows ${SCHEMA_VERSION}): run that release, or restore a backup`,
    );
  }
  const steps: string[] = [];
  if (found === 1 && (await isEmpty(store))) {
    // A brand-new data directory: nothing written by an earlier release, so nothing to migrate.
    await store.commit([{ type: 'put', family: 'meta', key: 'schema', value: SCHEMA_VERSION }]);
    return steps;
  }
  if (found < 2) {
    // 1 → 2: the due-time index holds every kind of job, each kind its own range.
    let ops: WriteOp[] = [];
    let moved = 0;
    for await (const key of store.families.schedule.keys()) {
      const k = key;
      const parts = k.split(':');
      if (parts.length !== 2 || !/^\d+$/.test(parts[0]!)) continue;
      ops.push({ type: 'del', family: 'schedule', key: k }, { type: 'put', family: 'schedule', key: `message:${parts[0]}:${parts[1]}`, value: parts[1] });
      moved += 1;
      if (ops.length >= 2000) {
        await store.commit(ops);
        ops = [];
      }
    }
    ops.push({ type: 'put', family: 'meta', key: 'schema', value: 2 });
    await store.commit(ops);
    steps.push(`schema 1 → 2: ${moved} due-time entries now name their job kind`);
  }
  if (found < 3) {
    // 2 → 3: the statistics read counters, which the messages stored so far never wrote.
    const counted = await hooks.buildCounters();
    await store.commit([{ type: 'put', family: 'meta', key: 'schema', value: 3 }]);
    steps.push(`schema 2 → 3: statistics counters built from ${counted} stored messages`);
  }
  if (found < 4) {
    // 3 → 4: nothing to move (the jobs stored so far are read where they are); a release before
    // this one would not find the jobs kept in their entries, and must not open the store.
    await store.commit([{ type: 'put', family: 'meta', key: 'schema', value: 4 }]);
    steps.push('schema 3 → 4: new webhook and route deliveries are kept in their due-time entries');
  }
  return steps;
}

/** Whether no family of this node's LevelDB holds a single key (a store just created). */
async function isEmpty(store: Store): Promise<boolean> {
  for (const family of store.localFamilies) {
    for await (const _key of family.keys({ limit: 1 })) return false;
  }
  return true;
}
