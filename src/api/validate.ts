import { z } from 'zod';
import { badRequest } from '../util/errors.ts';
import { isUuid } from '../util/ids.ts';
import { describeJsonProblem, findJsonProblem, MAX_BODY_DEPTH } from '../util/json-limits.ts';
import type { ApiContext } from './context.ts';

/** Parses the raw body as JSON and validates it: 400 naming the first bad field. */
export function parseBody<S extends z.ZodType>(ctx: ApiContext, schema: S): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(ctx.state.rawBody.toString('utf8'));
  } catch {
    throw badRequest('invalid request body');
  }
  if (mayBreakBounds(ctx.state.rawBody, MAX_BODY_DEPTH)) {
    const problem = findJsonProblem(json, MAX_BODY_DEPTH);
    if (problem) throw badRequest(describeJsonProblem(problem, MAX_BODY_DEPTH));
  }
  return check(schema, json);
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;

/**
 * Whether JSON text could parse to a value that breaks the bounds of findJsonProblem, told from
 * its bytes without walking the value. Decoded UTF-8 never holds an unpaired surrogate (bad
 * bytes become U+FFFD), so only a `\u` escape can bring one; and a value cannot nest deeper than
 * the number of `{` and `[` in its text (those inside strings only add to the count).
 */
function mayBreakBounds(raw: Buffer, maxDepth: number): boolean {
  if (raw.includes('\\u')) return true;
  let opened = 0;
  for (const byte of [OPEN_BRACE, OPEN_BRACKET]) {
    for (let at = raw.indexOf(byte); at !== -1; at = raw.indexOf(byte, at + 1)) {
      if (++opened > maxDepth) return true;
    }
  }
  return false;
}

export function parseQuery<S extends z.ZodType>(ctx: ApiContext, schema: S): z.output<S> {
  return check(schema, ctx.query);
}

/** A path parameter that must be a UUID (400 otherwise). */
export function uuidParam(ctx: ApiContext, name: string): string {
  const value = ctx.params[name];
  if (value === undefined || !isUuid(value)) throw badRequest(`invalid ${name}`);
  return value.toLowerCase();
}

function check<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') throw badRequest(`unknown field ${issue.keys.map((k) => [...issue.path, k].join('.')).join(', ')}`);
  const where = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
  throw badRequest(`${where}${issue.message}`);
}

/** An optional field that clients may also send as null: both read as absent. */
export function absent<S extends z.ZodType>(schema: S) {
  return schema.nullish().transform((v) => (v ?? undefined) as z.output<S> | undefined);
}

/**
 * An optional string field where "" means "not given": client libraries whose structs have no
 * omit-empty send every optional string, empty (the contract types these as plain strings).
 */
export function emptyAsAbsent<S extends z.ZodType>(schema: S) {
  return absent(z.preprocess((v) => (v === '' ? undefined : v), schema.optional()));
}
