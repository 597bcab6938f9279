import { isWellFormedText } from '../util/json-limits.ts';
import type { Page, PageRequest } from '../store/page.ts';
import { badRequest } from '../util/errors.ts';

export const MAX_LIMIT = 100;
/** Our cursors name store keys of a few hundred characters at most; anything longer is not ours. */
const MAX_CURSOR_KEY = 2048;

export interface PaginationInfo {
  has_more: boolean;
  next_cursor?: string;
  previous_cursor?: string;
}

interface CursorBody {
  v: 1;
  k: string;
}

/** Cursors are opaque to clients: base64url of a small JSON document naming a sort key. */
export function encodeCursor(key: string): string {
  return Buffer.from(JSON.stringify({ v: 1, k: key } satisfies CursorBody)).toString('base64url');
}

export function decodeCursor(cursor: string): string {
  try {
    const body = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as Partial<CursorBody>;
    const k = body.v === 1 ? body.k : undefined;
    if (typeof k === 'string' && k.length > 0 && k.length <= MAX_CURSOR_KEY && isWellFormedText(k)) return k;
  } catch {
    // fall through
  }
  throw badRequest('invalid cursor');
}

/** Reads `limit`, `after`, `before` from a query: limit 1..100 (default 100), cursors exclusive. */
export function parsePageQuery(query: Record<string, string | string[] | undefined>): PageRequest {
  const single = (name: string): string | undefined => {
    const value = query[name];
    if (Array.isArray(value)) throw badRequest(`${name} must be given once`);
    return value;
  };
  const limitText = single('limit');
  let limit = MAX_LIMIT;
  if (limitText !== undefined) {
    if (!/^\d+$/.test(limitText)) throw badRequest('limit must be between 1 and 100');
    limit = Number(limitText);
    if (limit < 1 || limit > MAX_LIMIT) throw badRequest('limit must be between 1 and 100');
  }
  const after = single('after');
  const before = single('before');
  if (after !== undefined && before !== undefined) throw badRequest('after and before are mutually exclusive');
  const req: PageRequest = { limit };
  if (after !== undefined) req.after = decodeCursor(after);
  if (before !== undefined) req.before = decodeCursor(before);
  return req;
}

export function paginationInfo(page: Page<unknown>): PaginationInfo {
  const info: PaginationInfo = { has_more: page.hasNext };
  const first = page.keys[0];
  const last = page.keys.at(-1);
  if (page.hasNext && last !== undefined) info.next_cursor = encodeCursor(last);
  if (page.hasPrevious && first !== undefined) info.previous_cursor = encodeCursor(first);
  return info;
}
