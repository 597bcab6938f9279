import type { FamilyApi } from './pg/family.ts';

/** Which slice of an ordered range to read: the first page, or the page after / before a key. */
export interface PageRequest {
  limit: number;
  after?: string;
  before?: string;
}

export interface Page<T> {
  items: T[];
  /** Sort key of each item, for cursors. */
  keys: string[];
  /** Items exist beyond the last item of the page. */
  hasNext: boolean;
  /** Items exist before the first item of the page. */
  hasPrevious: boolean;
}

/**
 * Reads one page of the keys starting with `prefix` in `sublevel`, in key order. The cursor
 * keys are the part after the prefix. Reads at most limit + 2 entries: never a full scan.
 */
export async function readPage<T>(sublevel: FamilyApi, prefix: string, req: PageRequest): Promise<Page<T>> {
  const lower = prefix;
  const upper = `${prefix}\xff`;
  const take = async (options: { gt: string; lt: string; reverse: boolean; limit: number }) => (await sublevel.iterator(options).all()) as Array<[string, T]>;

  if (req.before !== undefined) {
    const rows = await take({ gt: lower, lt: prefix + req.before, reverse: true, limit: req.limit + 1 });
    const hasPrevious = rows.length > req.limit;
    const page = rows.slice(0, req.limit).reverse();
    const last = page.at(-1)?.[0];
    // Nothing before the cursor in this range: what follows starts at the cursor itself. A merged
    // listing (domains split by validity) needs this for the range whose page came up empty.
    const hasNext =
      last === undefined
        ? (await sublevel.iterator({ gte: prefix + req.before, lt: upper, limit: 1 }).all()).length > 0
        : (await take({ gt: last, lt: upper, reverse: false, limit: 1 })).length > 0;
    return build(page, prefix, hasNext, hasPrevious);
  }

  const start = req.after !== undefined ? prefix + req.after : lower;
  const rows = await take({ gt: start, lt: upper, reverse: false, limit: req.limit + 1 });
  const hasNext = rows.length > req.limit;
  const page = rows.slice(0, req.limit);
  const first = page[0]?.[0];
  const hasPrevious = first === undefined ? req.after !== undefined : (await take({ gt: lower, lt: first, reverse: true, limit: 1 })).length > 0;
  return build(page, prefix, hasNext, hasPrevious);
}

function build<T>(rows: Array<[string, T]>, prefix: string, hasNext: boolean, hasPrevious: boolean): Page<T> {
  return {
    items: rows.map(([, value]) => value),
    keys: rows.map(([key]) => key.slice(prefix.length)),
    hasNext,
    hasPrevious,
  };
}

/** Every item of a paged listing, page by page (for jobs and operator tools, not list endpoints). */
export async function* everyItem<T>(read: (req: PageRequest) => Promise<Page<T>>, limit = 100): AsyncGenerator<T> {
  let after: string | undefined;
  for (;;) {
    const page = await read(after === undefined ? { limit } : { limit, after });
    yield* page.items;
    if (!page.hasNext || page.keys.length === 0) return;
    after = page.keys.at(-1);
  }
}

/**
 * A newest-first page read through an index walk: loads each key the walk yields, keeps the
 * records `keep` accepts, and stops one past the limit. With `before`, the walk ran oldest first
 * (from the cursor up) and the page is turned round; `keyOf` gives each record's cursor key.
 */
export async function collectNewestFirst<T>(
  walk: AsyncIterable<string>,
  load: (key: string) => Promise<T | undefined>,
  keep: (record: T) => boolean,
  keyOf: (record: T) => string,
  req: PageRequest,
): Promise<Page<T>> {
  const backwards = req.before !== undefined;
  const items: T[] = [];
  let more = false;
  for await (const key of walk) {
    const record = await load(key);
    if (record === undefined || !keep(record)) continue;
    if (items.length === req.limit) {
      more = true;
      break;
    }
    items.push(record);
  }
  if (backwards) items.reverse();
  return {
    items,
    keys: items.map(keyOf),
    hasNext: backwards ? true : more,
    hasPrevious: backwards ? more : req.after !== undefined,
  };
}

/** A page of `items` (already in id order) after or before a cursor id: for small bounded lists read whole. */
export function pageOfItems<T extends { id: string }>(items: T[], req: PageRequest): Page<T> {
  let start: number;
  let end: number;
  if (req.before !== undefined) {
    end = items.findIndex((w) => w.id >= req.before!);
    if (end === -1) end = items.length;
    start = Math.max(0, end - req.limit);
  } else {
    start = req.after === undefined ? 0 : items.findIndex((w) => w.id > req.after!);
    if (start === -1) start = items.length;
    end = Math.min(items.length, start + req.limit);
  }
  const page = items.slice(start, end);
  return { items: page, keys: page.map((w) => w.id), hasNext: end < items.length, hasPrevious: start > 0 };
}
