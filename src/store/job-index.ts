import type { WriteOp } from './group-commit.ts';
import type { Store } from './store.ts';
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
  constructor(private readonly store: Store) {}

  put(kind: JobKindName, id: string, dueMs: number): WriteOp {
    return { type: 'put', family: 'schedule', key: entryKey(kind, id, dueMs), value: id };
  }

  del(kind: JobKindName, id: string, dueMs: number): WriteOp {
    return { type: 'del', family: 'schedule', key: entryKey(kind, id, dueMs) };
  }

  /** Entries of `kind` due at or before `nowMs`, earliest first, at most `limit`. */
  async due(kind: JobKindName, nowMs: number, limit: number): Promise<DueEntry[]> {
    const keys = (await this.store.families.schedule.keys({ gt: `${kind}:`, lt: `${kind}:${timeKey(nowMs)};`, limit }).all()) as string[];
    return keys.map(parseEntry).filter((e): e is DueEntry => e !== null);
  }

  /** The due time of the earliest entry of `kind` after `nowMs`, or null when none. */
  async nextDue(kind: JobKindName, nowMs: number): Promise<number | null> {
    const [key] = (await this.store.families.schedule.keys({ gt: `${kind}:${timeKey(nowMs)};`, lt: `${kind};`, limit: 1 }).all()) as string[];
    return key === undefined ? null : (parseEntry(key)?.dueMs ?? null);
  }

  /** Removes one entry by its key (its job is gone or final). */
  drop(key: string): Promise<void> {
    return this.store.commit([{ type: 'del', family: 'schedule', key }]);
  }

  /** Every entry of `kind` in due order (the operator's views). */
  async *entries(kind: JobKindName): AsyncGenerator<DueEntry> {
    for await (const key of this.store.families.schedule.keys({ gt: `${kind}:`, lt: `${kind};` })) {
      const entry = parseEntry(key as string);
      if (entry) yield entry;
    }
  }

  async has(kind: JobKindName, id: string, dueMs: number): Promise<boolean> {
    return (await this.store.get<string>('schedule', entryKey(kind, id, dueMs))) !== undefined;
  }
}

export function entryKey(kind: JobKindName, id: string, dueMs: number): string {
  return `${kind}:${timeKey(dueMs)}:${id}`;
}

function parseEntry(key: string): DueEntry | null {
  const [kind, time, id] = key.split(':');
  if (time === undefined || id === undefined || !(JOB_KINDS as readonly string[]).includes(kind!)) return null;
  return { key, kind: kind as JobKindName, id, dueMs: Number(time) };
}
