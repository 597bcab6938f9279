import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
const doc = parse(readFileSync(resolve(here, '../contract/webhooks.yaml'), 'utf8')) as {
  webhooks: Record<string, { post: { requestBody: { content: Record<string, { schema: unknown }> } } }>;
};
const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
(addFormatsModule as unknown as (a: Ajv2020) => void)(ajv);
ajv.addSchema(doc, 'webhooks');

/** Throws with the schema errors when `payload` is not what webhooks.yaml declares for its `type`. */
export function assertWebhookPayload(payload: { type?: unknown }): void {
  const type = String(payload.type);
  if (!doc.webhooks[type]) throw new Error(`webhooks.yaml has no event ${type}`);
  const pointer = `/webhooks/${type.replace(/~/g, '~0').replace(/\//g, '~1')}/post/requestBody/content/application~1json/schema`;
  const validate = ajv.getSchema(`webhooks#${pointer}`) ?? ajv.compile({ $ref: `webhooks#${pointer}` });
  if (!validate(payload)) throw new Error(`${type} payload does not match webhooks.yaml: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(payload)}`);
}
