import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ValidateFunction } from 'ajv';
import { parse } from 'yaml';

/**
 * Checks legacy v1 responses against test/contract/openapi-v1.yaml (operation sendEmail,
 * the only one): the body of a status the document declares must match its schema; an
 * undeclared status is refused.
 */
const here = dirname(fileURLToPath(import.meta.url));
const SPEC_PATH = process.env.POSTILION_OPENAPI_V1 ?? resolve(here, '../contract/openapi-v1.yaml');

const doc = parse(readFileSync(SPEC_PATH, 'utf8')) as object;
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
addFormats(ajv);
ajv.addSchema(doc, 'openapi-v1');

/** The request body schema of POST /v1/email/send, and what its local `$ref`s point at. */
export const v1RequestSchema = (doc as { paths: Record<string, { post: { requestBody: { content: Record<string, { schema: unknown }> } } }> }).paths[
  '/v1/email/send'
]!.post.requestBody.content['application/json']!.schema;
export function v1Ref(ref: string): unknown {
  let node: unknown = doc;
  for (const part of ref.replace(/^#\//, '').split('/')) node = (node as Record<string, unknown> | undefined)?.[part];
  return node;
}

const SEND = `/paths/${encodeURIComponent('~1v1~1email~1send')}/post/responses`;
const JSON_SCHEMA = `content/${encodeURIComponent('application/json')}/schema`;
const compiled = new Map<number, ValidateFunction>();

/** Throws with the schema errors when `body` is not what POST /v1/email/send declares for `status`. */
export function assertMatchesV1Contract(status: number, body: unknown): void {
  if (![201, 400, 403].includes(status)) throw new Error(`sendEmail does not declare status ${status}: ${JSON.stringify(body)}`);
  let validate = compiled.get(status);
  if (!validate) {
    validate = ajv.compile({ $ref: `openapi-v1#${SEND}/${status}/${JSON_SCHEMA}` });
    compiled.set(status, validate);
  }
  if (!validate(body)) {
    throw new Error(`sendEmail ${status} response does not match the v1 contract: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body)}`);
  }
}
