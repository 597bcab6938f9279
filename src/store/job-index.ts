import type { WriteOp } from './group-commit.ts';
import type { StoreAccess } from './store.ts';
import { timeKey } from '../util/time.ts';

/** The kinds of job on the one due-time index. */
export const JOB_KINDS = ['message', 'webhook', 'route'] as const;
export type JobKindName = (typeof JOB_KINDS)[number];

export interface DueEntry {
  /** The entry's key on the index (its lease while the job is taken). */
  key: string;
  kind: JobKindName;
  id: string;
  dueMs: number;
}

/**
 * The due-time index every job kind shares: `<kind>:<due time>:<id>`. Each kind's entries are
 * one ordered range, so a backlog of one kind (webhooks for an endpoint that is down) never
 * hides the mail due behind it. The job's record keeps its own due time; an entry whose record
 * has moved on (or is gone) is stale and is dropped when it comes due.
 */
export class JobIndex {
  constructor(private readonly store: StoreAccess) {}

  /** The job's entry; its value is the job's id, or (`value`) what the kind keeps in it (store/jobs-repo.ts). */
  put(kind: JobKindName, id: string, dueMs: number, value: unknown = id): WriteOp {
    return { type: 'put', family: 'schedule', key: entryKey(kind, id, dueMs), value };
  }

  del(kind: JobKindName, id: string, dueMs: number): WriteOp {
    return { type: 'del', family: 'schedule', key: entryKey(kind, id, dueMs) };
  }

  /**
   * Entries of `kind` due at or before `nowMs`, earliest first, at most `limit`; with `from`, only
   * those whose key sorts at or after it (see `startOf`, `fromTime`).
   */
  async due(kind: JobKindName, nowMs: number, limit: number, from?: string): Promise<DueEntry[]> {
    const keys = await this.store.families.schedule.keys({ gte: from ?? startOf(kind), lt: `${kind}:${timeKey(nowMs)};`, limit }).all();
    const out: DueEntry[] = [];
    for (const key of keys) {
      const entry = parseEntry(key);
      if (entry) out.push(entry);
    }
    return out;
  }

  /** The due time of the earliest entry of `kind` after `nowMs`, or null when none. */
  async nextDue(kind: JobKindName, nowMs: number): Promise<number | null> {
    const [key] = await this.store.families.schedule.keys({ gt: `${kind}:${timeKey(nowMs)};`, lt: fenceKey(kind), limit: 1 }).all();
    return key === undefined ? null : (parseEntry(key)?.dueMs ?? null);
  }

  /**
   * Puts a live key at the end of every kind's range: `<kind>;`, the exclusive end of the range,
   * which no read of the kind's entries returns. A LevelDB read steps over deleted keys one by
   * one to the next live key before it learns it has left its range: without the fence, a read
   * reaching the end of the message entries steps over every webhook delivery deleted since the
   * last compaction (and one reaching the end of the last kind, over the next family's), which
   * under load is thousands of keys per read, several reads per turn of the engine.
   * Idempotent; written at each start (before the engine's first read).
   */
  fence(): Promise<void> {
    return this.store.commit(JOB_KINDS.map((kind) => ({ type: 'put' as const, family: 'schedule' as const, key: fenceKey(kind), value: '' })));
  }

  /** Removes one entry by its key (its job is gone or final). */
  drop(key: string): Promise<void> {
    return this.store.commit([{ type: 'del', family: 'schedule', key }]);
  }

  /** Every entry of `kind` in due order (the operator's views). */
  async *entries(kind: JobKindName): AsyncGenerator<DueEntry> {
    for await (const key of this.store.families.schedule.keys({ gt: `${kind}:`, lt: fenceKey(kind) })) {
      const entry = parseEntry(key);
      if (entry) yield entry;
    }
  }

  async has(kind: JobKindName, id: string, dueMs: number): Promise<boolean> {
    return (await this.store.get<string>('schedule', entryKey(kind, id, dueMs))) !== undefined;
  }
}

/** The fence closing `kind`'s range (see `fence`): the range's exclusive end. */
export function fenceKey(kind: JobKindName): string {
  return `${kind};`;
}

/** The lowest key of `kind`'s entries: `due` from here reads them all. */
export function startOf(kind: JobKindName): string {
  return `${kind}:`;
}

/** The lowest key of `kind`'s entries due at `ms`: `due` from here reads every entry due then or later. */
export function fromTime(kind: JobKindName, ms: number): string {
  return `${kind}:${timeKey(ms)}:`;
}

/** The lowest key after `key`: `due` from here reads past it. */
export function after(key: string): string {
  return `${key}\u0000`;
}

export function entryKey(kind: JobKindName, id: string, dueMs: number): string {
  return `${kind}:${timeKey(dueMs)}:${id}`;
}

function parseEntry(key: string): DueEntry | null {
  const first = key.indexOf(':');
  const second = key.indexOf(':', first + 1);
  if (first < 0 || second < 0) return null;
  const kind = key.slice(0, first);
  if (!(JOB_KINDS as readonly string[]).includes(kind)) return null;
  const third = key.indexOf(':', second + 1);
  return { key, kind: kind as JobKindName, id: key.slice(second + 1, third < 0 ? undefined : third), dueMs: Number(key.slice(first + 1, second)) };
}
