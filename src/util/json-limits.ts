/**
 * Bounds on parsed JSON, checked by an iterative walk before anything recursive (zod, template
 * contexts, substitution checks) touches the value: a body nested 10,000 levels deep must get a
 * 400, not a stack overflow, and text that is not well-formed Unicode (an unpaired surrogate
 * written as a `\ud800` escape) must never reach a store key or a MIME encoder.
 */

/** In `u` mode a surrogate pair reads as one code point: only an unpaired surrogate matches. */
const LONE_SURROGATE = /\p{Cs}/u;

export function isWellFormedText(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}

/** `text` with each unpaired surrogate replaced by U+FFFD, as a UTF-8 encoder would write it. */
export function wellFormed(text: string): string {
  return isWellFormedText(text) ? text : text.replace(/\p{Cs}/gu, '\uFFFD');
}

/** The deepest nesting a request body may have: the contract's bodies need 6 levels at most. */
export const MAX_BODY_DEPTH = 32;

/** A JSON value that breaks a bound, and where: `recipients.0.substitutions.x`. */
export interface JsonProblem {
  path: string;
  problem: 'depth' | 'unicode';
}

/**
 * The first problem of `value` (depth counted in arrays and objects, root = 1), or null. Object
 * keys are checked like strings. Iterative: its own memory is bounded by the value's size.
 */
export function findJsonProblem(value: unknown, maxDepth: number): JsonProblem | null {
  const stack: Array<{ value: unknown; depth: number; path: string }> = [{ value, depth: 0, path: '' }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    const v = item.value;
    if (typeof v === 'string') {
      if (!isWellFormedText(v)) return { path: item.path, problem: 'unicode' };
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    const depth = item.depth + 1;
    if (depth > maxDepth) return { path: item.path, problem: 'depth' };
    const at = (key: string) => (item.path === '' ? key : `${item.path}.${key}`);
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], depth, path: at(String(i)) });
      continue;
    }
    for (const [key, child] of Object.entries(v)) {
      if (!isWellFormedText(key)) return { path: item.path, problem: 'unicode' };
      stack.push({ value: child, depth, path: at(key) });
    }
  }
  return null;
}

/** The problem as a client reads it, naming the field (paths of bad keys name their object). */
export function describeJsonProblem(found: JsonProblem, maxDepth: number): string {
  const where = found.path === '' ? 'request body' : found.path;
  return found.problem === 'depth'
    ? `${where}: nested more than ${maxDepth} levels deep`
    : `${where}: must be valid Unicode text (it holds an unpaired surrogate)`;
}
