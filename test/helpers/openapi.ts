import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import { parse } from 'yaml';

/**
 * The one place that checks responses against the contract: test/contract/openapi.yaml (a copy of the contract),
 * looked up by operationId and status. A status an operation does not declare is refused, unless
 * it is an error any operation may answer for reasons of its own (ANY_OPERATION), which is
 * checked against ErrorResponse: a status the API answers for what an operation's input is
 * (400, 404, 409, …) must be listed under that operation.
 */
const here = dirname(fileURLToPath(import.meta.url));
const SPEC_PATH = process.env.POSTILION_OPENAPI ?? resolve(here, '../contract/openapi.yaml');

interface ResponseDoc {
  $ref?: string;
  content?: Record<string, { schema?: unknown }>;
}

interface OperationDoc {
  operationId?: string;
  responses?: Record<string, ResponseDoc>;
}

const doc = parse(readFileSync(SPEC_PATH, 'utf8')) as { paths: Record<string, Record<string, OperationDoc>> };
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
addFormats(ajv);
ajv.addFormat('fqdn', /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/i);
ajv.addSchema(doc, 'openapi');

/** Per operation: status → JSON pointer of the response object (shared `$ref` responses followed). */
const responses = new Map<string, Map<string, string>>();
for (const [path, item] of Object.entries(doc.paths)) {
  for (const [method, op] of Object.entries(item)) {
    if (!op?.operationId) continue;
    const byStatus = new Map<string, string>();
    for (const [status, response] of Object.entries(op.responses ?? {})) {
      byStatus.set(status, response.$ref ? response.$ref.slice(1) : `/paths/${escape(path)}/${method}/responses/${status}`);
    }
    responses.set(op.operationId, byStatus);
  }
}

/** The operation object of `operationId` in the contract (its parameters and request body), or undefined. */
export function contractOperation(operationId: string): (OperationDoc & { parameters?: unknown[]; requestBody?: unknown }) | undefined {
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) if (op?.operationId === operationId) return op;
  }
  return undefined;
}

/** What a local `$ref` (`#/components/...`) of the contract points at. */
export function contractRef(ref: string): unknown {
  return lookup(doc, ref);
}

/** Follows a local JSON pointer (`#/a/b`) in `document`. */
export function lookup(document: unknown, ref: string): unknown {
  let node: unknown = document;
  for (const part of ref.replace(/^#\//, '').split('/')) {
    node = (node as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return node;
}

function escape(segment: string): string {
  return encodeURIComponent(segment.replace(/~/g, '~0').replace(/\//g, '~1'));
}

/**
 * Errors that do not depend on the operation, so the contract lists them on none or only some:
 * authentication and scopes (401, 403), the method (405), the transport (408, 413, 431), the
 * rate limits (429), the server (500, 503 busy, 507 store full).
 */
export const ANY_OPERATION = new Set([401, 403, 405, 408, 413, 429, 431, 500, 503, 507]);

const compiled = new Map<string, ValidateFunction>();

function validatorFor(ref: string): ValidateFunction {
  let fn = compiled.get(ref);
  if (!fn) {
    fn = ajv.compile({ $ref: ref });
    compiled.set(ref, fn);
  }
  return fn;
}

/** Throws with the schema errors when `body` is not what `operationId` declares for `status`. */
export function assertMatchesContract(operationId: string, status: number, body: unknown): void {
  const byStatus = responses.get(operationId);
  if (!byStatus) throw new Error(`operationId ${operationId} is not in the OpenAPI document`);
  const pointer = byStatus.get(String(status));
  let ref: string;
  if (pointer) {
    ref = `openapi#${pointer}/content/${escape('application/json')}/schema`;
  } else if (ANY_OPERATION.has(status)) {
    ref = 'openapi#/components/schemas/ErrorResponse';
  } else {
    throw new Error(`${operationId} does not declare status ${status}`);
  }
  const validate = validatorFor(ref);
  if (!validate(body)) {
    throw new Error(`${operationId} ${status} response does not match the contract: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body)}`);
  }
}
