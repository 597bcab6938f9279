import { writeFileSync } from 'node:fs';
import { expect } from 'chai';
import { OPERATIONS } from '../../../src/api/operations.ts';
import { startMessageBed, SENDER_DOMAIN, type MessageBed } from '../../helpers/messages.ts';
import { assertMatchesContract, contractOperation, contractRef } from '../../helpers/openapi.ts';
import { assertMatchesV1Contract, v1Ref, v1RequestSchema } from '../../helpers/openapi-v1.ts';
import { RawConnection } from '../../helpers/raw-http.ts';
import { diffSnapshots, snapshotStore, withoutField, type StoreSnapshot } from '../../helpers/store-snapshot.ts';

/**
 * The malformed-request walk: every operation of OPERATIONS (so a new one is covered as soon as it
 * is listed) and the legacy v1 send get, against one real daemon, bodies that are not JSON or not
 * objects, each field of the contract's request schema set to wrong types, huge, lone-surrogate,
 * control-character and deeply nested values, bad path ids, bad query parameters and wrong
 * methods. Every answer must be below 500, be the contract's error body when it is an error, show
 * no internals, and leave the store as it was (only an accepted body may write). Failures are
 * collected and reported together, one line each, as a work list. No request carries an
 * Idempotency-Key: a stored 4xx outcome would be a legitimate write (idempotency.test.ts covers it).
 */

const V1 = 'sendEmailV1';
/** The walk stays bounded as operations are added: past this, trim the cases rather than raise it. */
const MAX_REQUESTS = 5000;
/**
 * Requests that may not write at all are checked against the store together, this many at a time
 * (a snapshot reads the whole store, on PostgreSQL a query of every row): a write by any of them
 * shows in the batch's diff, and the failure names the batch. One that may write is checked alone.
 */
const UNWRITING_BATCH = 25;
/** A cron expression that never fires during a test: the daemon's jobs must not write under the walk. */
const NEVER_DURING_TESTS = '0 0 1 1 *';
const NOTHING_UUID = '01890a5d-ac96-774b-bcce-b302099a8057';
const MiB = 1024 * 1024;
const DEPTH = 10_000;
/** A route target that passes the target rules without DNS (saving a route never connects). */
const WALK_ROUTE = { name: 'walk', url: 'https://93.184.216.34/walk' };

/** `refuse`: the answer must be an error. `may`: the input is odd but may be accepted (then it may write). */
type Expectation = 'refuse' | 'may';

interface Case {
  op: string;
  what: string;
  method: string;
  /** Path and query, exactly as sent (percent-encodings untouched). */
  path: string;
  body?: string | Buffer;
  expect: Expectation;
  /** Sent over a raw connection: fetch refuses methods such as TRACE. */
  raw?: boolean;
}

// ---------------------------------------------------------------------------------------------
// The contract's request schemas, read by operationId.

type Schema = Record<string, unknown>;

interface Field {
  /** Path of the field in the body: ['label'], or ['content', 'subject'] for v1. */
  path: string[];
  types: Set<string>;
  required: boolean;
  schema: Schema;
  /** Resolves the `$ref`s of the document the field comes from. */
  ref: (r: string) => unknown;
}

function deref(schema: unknown, ref: (r: string) => unknown): Schema {
  let s = (schema ?? {}) as Schema;
  for (let i = 0; i < 10 && typeof s.$ref === 'string'; i++) s = { ...(ref(s.$ref) as Schema), ...withoutRef(s) };
  return s;
}

function withoutRef(s: Schema): Schema {
  const { $ref: _ignored, ...rest } = s;
  return rest;
}

/** The JSON types a schema allows ('integer' counts as 'number'); empty when it says nothing. */
function typesOf(s: Schema): Set<string> {
  const types = new Set<string>();
  const declared = s.type;
  for (const t of Array.isArray(declared) ? declared : declared !== undefined ? [declared] : []) types.add(t === 'integer' ? 'number' : String(t));
  if (s.nullable === true) types.add('null');
  if (types.size === 0 && s.properties) types.add('object');
  return types;
}

/** The properties of an object schema, with those of its anyOf/oneOf/allOf branches. */
function fieldsOf(schema: Schema, ref: (r: string) => unknown, prefix: string[] = []): Field[] {
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const props = new Map<string, Schema>();
  const collect = (s: Schema) => {
    for (const [name, p] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) {
      props.set(name, { ...(props.get(name) ?? {}), ...deref(p, ref) });
    }
  };
  collect(schema);
  for (const branch of ['anyOf', 'oneOf', 'allOf']) for (const b of (schema[branch] as unknown[] | undefined) ?? []) collect(deref(b, ref));
  return [...props].map(([name, s]) => ({ path: [...prefix, name], types: typesOf(s), required: required.has(name), schema: s, ref }));
}

function requestSchemaOf(operationId: string): Schema | null {
  const op = contractOperation(operationId) as { requestBody?: { content?: Record<string, { schema?: unknown }> } } | undefined;
  const schema = op?.requestBody?.content?.['application/json']?.schema;
  return schema === undefined ? null : deref(schema, contractRef);
}

interface QueryParam {
  name: string;
  required: boolean;
  schema: Schema;
}

function queryParamsOf(operationId: string): QueryParam[] {
  const op = contractOperation(operationId);
  return (op?.parameters ?? [])
    .map((p) => deref(p, contractRef) as { in?: string; name?: string; required?: boolean; schema?: unknown })
    .filter((p) => p.in === 'query' && typeof p.name === 'string')
    .map((p) => ({ name: p.name!, required: p.required === true, schema: deref(p.schema, contractRef) }));
}

// ---------------------------------------------------------------------------------------------
// Malformed values, as raw JSON text (so that lone surrogates and deep nesting reach the server as
// written, not as JSON.stringify would write them).

const DEEP_ARRAYS = '['.repeat(DEPTH) + ']'.repeat(DEPTH);
const DEEP_OBJECTS = '{"a":'.repeat(DEPTH) + '1' + '}'.repeat(DEPTH);
const LONE_SURROGATE = '"a\\ud800b"';
const CONTROL = JSON.stringify('a\u0001\u0008\u001b[31m\u007f\u0085b\r\nBcc: walk@example.org');
const NUL = JSON.stringify('a\u0000b');
const HUGE = JSON.stringify('x'.repeat(MiB));
/** MiniJinja that does not compile, fails when rendered, or would render far too much (message fields are templates). */
const TEMPLATES: Array<[string, string]> = [
  ['template syntax error', JSON.stringify('{{ name')],
  ['template runtime error', JSON.stringify('{{ 1 / 0 }}{{ name.x.y() }}')],
  ['template rendering 10^10 characters', JSON.stringify('{% for i in range(100000) %}{% for j in range(10000) %}xxxxxxxxxx{% endfor %}{% endfor %}')],
];
/** Formats whose values can never be a huge string, control characters or NUL. */
const STRICT_FORMATS = new Set(['email', 'date-time', 'uuid', 'hostname', 'uri', 'ipv4', 'ipv6']);

/** The body `base` with the field at `path` replaced by the raw JSON `raw` (added when absent). */
function bodyWith(base: Record<string, unknown>, path: string[], raw: string): string {
  const [head, ...rest] = path as [string, ...string[]];
  const entries = Object.entries(base)
    .filter(([k]) => k !== head)
    .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
  const value = rest.length === 0 ? raw : bodyWith((base[head] ?? {}) as Record<string, unknown>, rest, raw);
  return `{${[...entries, `${JSON.stringify(head)}:${value}`].join(',')}}`;
}

/** Cases for one field: wrong types, then what fits its kind. */
function fieldCases(field: Field): Array<{ what: string; raw: string; expect: Expectation }> {
  const { types, schema } = field;
  const name = field.path.join('.');
  const untyped = types.size === 0;
  const wrong = (type: string) => (untyped || types.has(type) ? 'may' : 'refuse');
  const cases: Array<{ what: string; raw: string; expect: Expectation }> = [];
  const isString = types.has('string');
  const isEnum = Array.isArray(schema.enum);
  const strict = isEnum || STRICT_FORMATS.has(String(schema.format));

  const maximum = typeof schema.maximum === 'number' ? schema.maximum : Infinity;
  cases.push({ what: `${name}: number`, raw: '12345', expect: isEnum || maximum < 12345 ? 'refuse' : wrong('number') });
  cases.push({ what: `${name}: boolean`, raw: 'true', expect: isEnum ? 'refuse' : wrong('boolean') });
  if (!isString) cases.push({ what: `${name}: string`, raw: '"walk"', expect: wrong('string') });
  // An array of a number and an object fits no typed item schema.
  const items = deref(schema.items, field.ref);
  cases.push({ what: `${name}: array`, raw: '[1,{"x":1}]', expect: types.has('array') && typesOf(items).size === 0 ? 'may' : wrong('array') });
  // An object with an unknown member fits an object schema unless it has required members or typed values.
  const additional = schema.additionalProperties;
  const openObject = !Array.isArray(schema.required) && (additional === undefined || additional === true);
  cases.push({ what: `${name}: object`, raw: '{"x":1}', expect: types.has('object') && openObject ? 'may' : wrong('object') });
  cases.push({ what: `${name}: null`, raw: 'null', expect: field.required && !types.has('null') ? 'refuse' : 'may' });
  cases.push({ what: `${name}: arrays nested ${DEPTH} deep`, raw: DEEP_ARRAYS, expect: 'refuse' });
  cases.push({ what: `${name}: objects nested ${DEPTH} deep`, raw: DEEP_OBJECTS, expect: 'refuse' });
  if (isString || untyped) {
    const maxLength = typeof schema.maxLength === 'number' ? schema.maxLength : Infinity;
    cases.push({ what: `${name}: 1 MiB string`, raw: HUGE, expect: strict || maxLength < MiB ? 'refuse' : 'may' });
    cases.push({ what: `${name}: lone surrogate`, raw: LONE_SURROGATE, expect: 'refuse' });
    cases.push({ what: `${name}: control characters and CRLF`, raw: CONTROL, expect: strict ? 'refuse' : 'may' });
    cases.push({ what: `${name}: NUL`, raw: NUL, expect: strict ? 'refuse' : 'may' });
    for (const [what, raw] of TEMPLATES) cases.push({ what: `${name}: ${what}`, raw, expect: strict ? 'refuse' : 'may' });
  }
  if (types.has('array') && typesOf(items).has('string')) {
    cases.push({ what: `${name}: item with a lone surrogate`, raw: `[${LONE_SURROGATE}]`, expect: 'refuse' });
    cases.push({ what: `${name}: item with control characters`, raw: `[${CONTROL}]`, expect: 'may' });
  }
  if (types.has('object') && additional !== undefined && additional !== false) {
    cases.push({ what: `${name}: member value with a lone surrogate`, raw: `{"X-Walk":${LONE_SURROGATE}}`, expect: 'refuse' });
    cases.push({ what: `${name}: member name with a lone surrogate`, raw: `{${LONE_SURROGATE}:"v"}`, expect: 'refuse' });
    // DESIGN §4: client-supplied header names and values are checked for CR/LF.
    cases.push({ what: `${name}: member value with CRLF`, raw: `{"X-Walk":${CONTROL}}`, expect: name === 'headers' ? 'refuse' : 'may' });
  }
  return cases;
}

/** Cases about the body as a whole. */
function bodyShapeCases(base: Record<string, unknown>): Array<{ what: string; body: string | Buffer; expect: Expectation }> {
  const text = JSON.stringify(base);
  const firstString = Object.entries(base).find(([, v]) => typeof v === 'string')?.[0];
  const cases: Array<{ what: string; body: string | Buffer; expect: Expectation }> = [
    { what: 'body: invalid JSON', body: text.slice(0, -1) + ',', expect: 'refuse' },
    { what: 'body: empty', body: '', expect: 'refuse' },
    { what: 'body: a JSON array', body: `[${text}]`, expect: 'refuse' },
    { what: 'body: a JSON string', body: '"walk"', expect: 'refuse' },
    { what: 'body: a JSON number', body: '42', expect: 'refuse' },
    { what: 'body: JSON null', body: 'null', expect: 'refuse' },
    { what: `body: arrays nested ${DEPTH} deep`, body: DEEP_ARRAYS, expect: 'refuse' },
    { what: `body: objects nested ${DEPTH} deep`, body: DEEP_OBJECTS, expect: 'refuse' },
    { what: 'body: member name with a lone surrogate', body: `${text.slice(0, -1)}${text.length > 2 ? ',' : ''}${LONE_SURROGATE}:1}`, expect: 'refuse' },
  ];
  if (firstString) {
    // A raw (unescaped) control character inside a string is not JSON.
    cases.push({ what: `body: raw control character in ${firstString}`, body: bodyWith(base, [firstString], '"a\u0001b"'), expect: 'refuse' });
    // Bytes that are not UTF-8 (decoders replace them): odd, not necessarily refused.
    const [before, after] = bodyWith(base, [firstString], '"a@@b"').split('@@') as [string, string];
    const body = Buffer.concat([Buffer.from(before), Buffer.from([0xff, 0xfe, 0xc0, 0xaf]), Buffer.from(after)]);
    cases.push({ what: `body: invalid UTF-8 in ${firstString}`, body, expect: 'may' });
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Query parameters.

const cursor = (doc: string) => Buffer.from(doc).toString('base64url');

function queryValueCases(param: QueryParam): Array<{ what: string; value: string; expect: Expectation }> {
  const types = typesOf(param.schema);
  const format = String(param.schema.format);
  const typed = types.has('number') || types.has('boolean') || Array.isArray(param.schema.enum) || STRICT_FORMATS.has(format);
  const odd: Expectation = typed ? 'refuse' : 'may';
  const cases = [
    { what: 'huge', value: 'x'.repeat(8000), expect: odd },
    { what: 'negative', value: '-1', expect: odd },
    { what: '%ED%A0%80 (a surrogate in UTF-8)', value: '%ED%A0%80', expect: odd },
    { what: '%ff (not UTF-8)', value: '%ff', expect: odd },
    { what: '%00', value: '%00', expect: odd },
    { what: '%C0%AF (overlong UTF-8)', value: '%C0%AF', expect: odd },
  ];
  if (types.has('number')) {
    for (const v of ['abc', '1.5', '0', '101', '99999999999999999999999', '1e2', '%201'])
      cases.push({ what: `not an integer in range (${v})`, value: v, expect: 'refuse' });
  }
  if (types.has('boolean')) cases.push({ what: 'not a boolean', value: 'maybe', expect: 'refuse' });
  if (format === 'date-time') cases.push({ what: 'not a date-time', value: '2026-13-45T99%3A99%3A99Z', expect: 'refuse' });
  if (format === 'email') cases.push({ what: 'not an email address', value: 'not-an-email', expect: 'refuse' });
  if (Array.isArray(param.schema.enum)) cases.push({ what: 'not in the enum', value: 'fortnight', expect: 'refuse' });
  if (param.name === 'after' || param.name === 'before') {
    cases.push(
      { what: 'cursor of another API', value: 'eyJpZCI6MTIzNH0=', expect: 'refuse' },
      { what: 'not a cursor', value: 'not-a-cursor', expect: 'refuse' },
      { what: 'cursor of a key that does not exist', value: cursor('{"v":1,"k":"zzzz"}'), expect: 'may' },
      { what: 'cursor holding a lone surrogate', value: cursor('{"v":1,"k":"\\ud800"}'), expect: 'refuse' },
      { what: 'cursor of a 3000-character key', value: cursor(JSON.stringify({ v: 1, k: 'k'.repeat(3000) })), expect: 'refuse' },
      // Deep enough to hurt a recursive parser, short enough for the request line (16 KiB of headers).
      { what: 'cursor of JSON nested 4000 deep', value: cursor('['.repeat(4000) + ']'.repeat(4000)), expect: 'refuse' },
    );
  }
  return cases;
}

/** A valid value for a query parameter, for required ones and repeats. */
function validQueryValue(param: QueryParam): string {
  const types = typesOf(param.schema);
  if (types.has('number')) return '1';
  if (types.has('boolean')) return 'true';
  if (Array.isArray(param.schema.enum)) return String(param.schema.enum[0]);
  if (param.schema.format === 'date-time') return '2026-11-01T00%3A00%3A00Z';
  if (param.schema.format === 'email') return 'nobody%40example.org';
  return 'walk';
}

// ---------------------------------------------------------------------------------------------

describe('malformed-request walk over every operation', function () {
  this.timeout(120_000);

  let bed: MessageBed;
  let accountId: string;
  let adminKey: string;
  let narrowKey: string;
  let v1Key: string;
  /** A valid value for each path parameter, so that varying one still reaches the handler. */
  const ids: Record<string, string> = {};

  before(async function () {
    this.timeout(60_000);
    const many = { per_second: 1_000_000, burst: 1_000_000 };
    bed = await startMessageBed({
      // 429s would hide what the handlers do.
      api: { rate_limits: { general: many, statistics: many }, auth_failures: many, idempotency: { purge_schedule: NEVER_DURING_TESTS } },
      domains: { check_schedule: NEVER_DURING_TESTS },
      dkim: { rotation_schedule: NEVER_DURING_TESTS },
      messages: { retention_purge_schedule: NEVER_DURING_TESTS },
    });
    accountId = bed.server.accountId;
    adminKey = bed.server.adminKey;
    const A = `/v2/accounts/${accountId}`;
    const created = async (path: string, body: unknown) => {
      const res = await bed.api('POST', `${A}${path}`, { body });
      expect(res.status, JSON.stringify(res.body)).to.be.oneOf([201, 202]);
      return res.body;
    };
    ids.account_id = accountId;
    ids.key_id = (await created('/api-keys', { label: 'walk target', scopes: ['domains:read'] })).id;
    ids.domain = (await created('/domains', { domain: 'walk-target.example' })).domain;
    ids.smtp_credential_id = (await created('/smtp-credentials', { name: 'walk target', scope: 'global' })).id;
    ids.message_id = (await bed.send()).body.data[0].id;
    ids.user_id = (await bed.api('GET', `${A}/members`)).body.data[0].user_id;
    ids.route_id = (await created('/routes', { ...WALK_ROUTE, name: 'walk target', recipient: `walk-target@${SENDER_DOMAIN}` })).id;
    // Something a wrongly unfiltered delete or wipe would remove.
    await created('/suppressions', { email: 'kept@example.org', expires_at: '2026-12-31T00:00:00Z' });
    narrowKey = await bed.key(['domains:read', `messages:read:{${SENDER_DOMAIN}}`]);
    v1Key = await bed.v1Key();
  });

  after(async () => {
    await bed?.stop();
  });

  /**
   * A valid body per operation, so that one mutated field is what the handler sees. `__N__` is
   * replaced by the case's number: an odd input that is accepted does not turn the cases after it
   * into duplicates (409) that never reach the field checks.
   */
  function baseBody(operationId: string): Record<string, unknown> {
    const from = { email: `app@${SENDER_DOMAIN}`, name: 'App' };
    const bases: Record<string, Record<string, unknown>> = {
      createAPIKey: { label: 'walk', scopes: ['domains:read'] },
      updateAPIKey: { label: 'walk renamed' },
      createDomain: { domain: 'walk-__N__.example' },
      updateDomain: { tracking_subdomain: 'click' },
      // With substitutions, so that every case goes through the template engine.
      createMessage: {
        from,
        recipients: [{ email: 'rcpt@example.org', name: 'Rcpt' }],
        subject: 'Walk',
        text_content: 'Hi {{ name }}',
        substitutions: { name: 'Walk' },
      },
      createConversationMessage: { from, to: [{ email: 'rcpt@example.org' }], subject: 'Walk', text_content: 'Hi' },
      updateAccount: { about: 'walk' },
      addAccountMember: { email: 'walk-__N__@example.org', role: 'Developer' },
      createSuppression: { email: 'walk-__N__@example.org', expires_at: '2026-12-01T00:00:00Z' },
      // Scoped, so that the domain names are checked (a global credential ignores them).
      createSMTPCredential: { name: 'walk', scope: 'scoped', domains: [SENDER_DOMAIN] },
      // At a domain of the account, to a public literal (no DNS): the pattern and URL checks pass.
      createRoute: { ...WALK_ROUTE, recipient: `walk-__N__@${SENDER_DOMAIN}` },
      updateRoute: { name: 'walk renamed', recipient: `walk-*@${SENDER_DOMAIN}` },
      // A public literal too, disabled, with no event flags (they default to false): a webhook the
      // walk creates (one case turns a flag on, another enables it) is sent nothing, whose
      // fan-out would write under later cases.
      createWebhook: { ...WALK_ROUTE, scope: 'global', enabled: false },
      [V1]: { from, recipients: [{ email: 'rcpt@example.org' }], content: { subject: 'Walk', text_body: 'Hi' } },
    };
    // Operations without a known-good body start from the contract's example.
    const example = (requestSchemaOf(operationId)?.example ?? {}) as Record<string, unknown>;
    return bases[operationId] ?? example;
  }

  function pathOf(template: string, override: Record<string, string> = {}): string {
    return template.replace(/:([a-z_]+)/g, (_m, name: string) => override[name] ?? encodeURIComponent(ids[name] ?? NOTHING_UUID));
  }

  function cases(): Case[] {
    const all: Case[] = [];
    const badIds = ['not-a-uuid', NOTHING_UUID, '%00', '%ff', '..%2f', '%ED%A0%80', 'x'.repeat(300)];
    for (const [operationId, op] of Object.entries(OPERATIONS)) {
      const template = `/v2${op.path}`;
      const path = pathOf(template);
      const schema = requestSchemaOf(operationId);
      const base = schema ? baseBody(operationId) : null;
      const baseText = base ? JSON.stringify(base) : undefined;
      const push = (what: string, p: string, body: string | Buffer | undefined, expectation: Expectation) =>
        all.push({ op: operationId, what, method: op.method, path: p, ...(body !== undefined ? { body } : {}), expect: expectation });

      // Bodies.
      if (schema && base) {
        for (const c of bodyShapeCases(base)) push(c.what, path, c.body, c.expect);
        for (const field of fieldsOf(schema, contractRef)) for (const c of fieldCases(field)) push(c.what, path, bodyWith(base, field.path, c.raw), c.expect);
      }
      // Path ids, one parameter at a time.
      for (const name of [...op.path.matchAll(/:([a-z_]+)/g)].map((m) => m[1]!)) {
        for (const bad of badIds)
          push(`path ${name}=${bad.length > 40 ? `${bad.length} characters` : bad}`, pathOf(template, { [name]: bad }), baseText, 'refuse');
      }
      // Query parameters, one at a time, the required ones valid otherwise.
      const params = queryParamsOf(operationId);
      const required = params.filter((p) => p.required);
      const query = (entries: string[]) => `${path}?${entries.join('&')}`;
      const others = (name: string) => required.filter((p) => p.name !== name).map((p) => `${p.name}=${validQueryValue(p)}`);
      for (const param of params) {
        for (const c of queryValueCases(param))
          push(`query ${param.name}: ${c.what}`, query([...others(param.name), `${param.name}=${c.value}`]), baseText, c.expect);
        const repeated = [`${param.name}=${validQueryValue(param)}`, `${param.name}=${param.name === 'limit' ? '2' : validQueryValue(param)}`];
        // Pagination parameters must be given once; a repeated filter is odd but may be read.
        const once = ['limit', 'after', 'before'].includes(param.name);
        push(`query ${param.name} repeated`, query([...others(param.name), ...repeated]), baseText, once ? 'refuse' : 'may');
      }
      if (params.some((p) => p.name === 'after') && params.some((p) => p.name === 'before')) {
        push(
          'query after and before together',
          query([...required.map((p) => `${p.name}=${validQueryValue(p)}`), `after=${cursor('{"v":1,"k":"a"}')}`, `before=${cursor('{"v":1,"k":"z"}')}`]),
          baseText,
          'refuse',
        );
      }
      if (op.method === 'GET' && params.length === 0) {
        push('query: an undeclared parameter, repeated and not UTF-8', `${path}?limit=1&limit=2&x=%ff&y=%ED%A0%80`, undefined, 'may');
      }
    }

    // The legacy v1 send: its fields are the top-level ones and those of `content`.
    const v1Schema = deref(v1RequestSchema, v1Ref);
    const v1Base = baseBody(V1);
    const v1Fields = fieldsOf(v1Schema, v1Ref).flatMap((f) => (f.path[0] === 'content' ? [f, ...fieldsOf(f.schema, v1Ref, ['content'])] : [f]));
    for (const c of bodyShapeCases(v1Base)) all.push({ op: V1, what: c.what, method: 'POST', path: '/v1/email/send', body: c.body, expect: c.expect });
    for (const field of v1Fields) {
      for (const c of fieldCases(field))
        all.push({ op: V1, what: c.what, method: 'POST', path: '/v1/email/send', body: bodyWith(v1Base, field.path, c.raw), expect: c.expect });
    }

    // Wrong methods, once per path.
    const paths = new Map<string, string>();
    for (const [operationId, op] of Object.entries(OPERATIONS)) if (!paths.has(op.path)) paths.set(op.path, operationId);
    for (const [template, operationId] of paths) {
      all.push({ op: operationId, what: 'method TRACE', method: 'TRACE', path: pathOf(`/v2${template}`), expect: 'refuse', raw: true });
      all.push({ op: operationId, what: 'method PATCH', method: 'PATCH', path: pathOf(`/v2${template}`), body: '{}', expect: 'refuse' });
    }
    all.push({ op: V1, what: 'method TRACE', method: 'TRACE', path: '/v1/email/send', expect: 'refuse', raw: true });
    all.push({ op: V1, what: 'method PATCH', method: 'PATCH', path: '/v1/email/send', body: '{}', expect: 'refuse' });
    return all.map((c, n) => {
      if (typeof c.body === 'string') return { ...c, body: c.body.replaceAll('__N__', String(n)) };
      if (c.body) return { ...c, body: Buffer.from(c.body.toString('latin1').replaceAll('__N__', String(n)), 'latin1') };
      return c;
    });
  }

  /** Text that only internals write: stack traces, engine errors, JavaScript error names. */
  const INTERNAL =
    /Maximum call stack|URIError|memory access|TypeError|ReferenceError|RangeError|SyntaxError|Cannot read propert|Unexpected token|in JSON at position|node:internal|\bat \S+ \(\S+:\d+:\d+\)|(?:^|\\n)\s*at \S|\.ts:\d+/;

  it('answers every malformed request below 500, with the error body, no internals, and writes nothing', async () => {
    const walk = cases();
    const narrowSample = walk.filter((c, i) => i % 7 === 0 && c.op !== V1 && !c.raw);
    expect(walk.length + narrowSample.length, 'the walk must stay bounded').to.be.at.most(MAX_REQUESTS);

    const core = bed.server.daemon.core;
    // An API key's last_used_at is written (store.putRelaxed, ApiKeys.authenticate) by any
    // authenticated request, malformed or not, at most once a resolution window: it is the one
    // field that legitimately changes without the request being accepted. Nothing else is left out.
    const normalize = withoutField(core.store.levels.apiKeys.prefix, 'lastUsedAt');
    const failures: Array<{ cause: string; line: string }> = [];
    const accepted: string[] = [];
    let snapshot: StoreSnapshot = await snapshotStore(core, normalize);
    let raw = await RawConnection.open(bed.server.url);
    let rawSent = 0;
    let requests = 0;
    const started = Date.now();
    const dump: string[] = [];

    /** The requests sent since the last snapshot, none of which may write (with their status). */
    let unchecked: string[] = [];
    /** Compares the store with the last snapshot: any change is a write by one of `unchecked`. */
    const checkUnwriting = async () => {
      if (unchecked.length === 0) return;
      const next = await snapshotStore(core, normalize);
      const changes = diffSnapshots(snapshot, next);
      snapshot = next;
      if (changes.length > 0) {
        const detail = changes.slice(0, 4).join(', ') + (changes.length > 4 ? ` (+${changes.length - 4})` : '');
        failures.push({ cause: 'wrote to the store (one of a batch that may not write)', line: `${detail} after:\n      ${unchecked.join('\n      ')}` });
      }
      unchecked = [];
    };

    const run = async (c: Case, key: 'admin' | 'narrow') => {
      requests++;
      const label = `${c.op} ${key === 'narrow' ? '[narrow key] ' : ''}${c.what} — ${c.method} ${c.path.length > 120 ? `${c.path.slice(0, 117)}...` : c.path}`;
      const fail = (cause: string, detail = '') => failures.push({ cause, line: `${label}${detail ? `: ${detail}` : ''}` });
      // Only an odd input with a body, answered below 400, may write: checked alone, from a fresh snapshot.
      const mayWrite = c.expect === 'may' && c.body !== undefined && !c.what.startsWith('query') && !c.what.startsWith('path');
      if (mayWrite) await checkUnwriting();
      const headers: Record<string, string> = c.op === V1 ? { 'x-api-key': v1Key } : { authorization: `Bearer ${key === 'narrow' ? narrowKey : adminKey}` };
      if (c.body !== undefined) headers['content-type'] = 'application/json';

      let status = 0;
      let text = '';
      const sent = performance.now();
      try {
        if (c.raw) {
          if (raw.closed) {
            raw = await RawConnection.open(bed.server.url);
            rawSent = 0;
          }
          const head = Object.entries(headers)
            .map(([k, v]) => `${k}: ${v}\r\n`)
            .join('');
          await raw.write(`${c.method} ${c.path} HTTP/1.1\r\nHost: walk\r\n${head}Content-Length: 0\r\n\r\n`);
          const res = await raw.response(++rawSent);
          if (!res) throw new Error('the connection closed without a response');
          status = res.status;
          text = res.text;
        } else {
          const res = await fetch(bed.server.url + c.path, { method: c.method, headers, ...(c.body !== undefined ? { body: c.body } : {}) });
          status = res.status;
          text = await res.text();
        }
      } catch (err) {
        fail('no response', (err as Error).message);
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        if (status !== 0) fail(`${status} with a body that is not JSON`, JSON.stringify(text.slice(0, 100)));
      }

      if (status >= 500) fail(`status ${status}`, JSON.stringify(body ?? text).slice(0, 200));
      else if (c.expect === 'refuse' && status < 400) fail('accepted (expected a 4xx)', `${status} ${JSON.stringify(body).slice(0, 200)}`);
      if (INTERNAL.test(text)) fail('internal text in the body', text.slice(0, 200));
      if (body !== undefined && status >= 400) {
        const shape = c.op === V1 ? 'status' : 'message';
        const b = body as Record<string, unknown>;
        if (typeof b !== 'object' || b === null || typeof b[shape] !== 'string' || Object.keys(b).length !== 1) {
          fail(`${status} without the ${c.op === V1 ? 'v1' : 'v2'} error body {${shape}}`, JSON.stringify(body).slice(0, 200));
        }
      }
      if (body !== undefined) {
        try {
          if (c.op === V1) {
            // v1 declares 201, 400 and 403 only; its other errors are checked for {status} above.
            if (status < 400 || status === 400 || status === 403) assertMatchesV1Contract(status, body);
          } else {
            assertMatchesContract(c.op, status, body);
          }
        } catch (err) {
          fail("not the contract's response", (err as Error).message.split('\n')[0]);
        }
      }

      if (process.env.WALK_DUMP) dump.push(`${status} ${(performance.now() - sent).toFixed(0)}ms ${label} ${text.slice(0, 400)}`);
      if (!mayWrite) {
        unchecked.push(`${status} ${label}`);
        if (unchecked.length >= UNWRITING_BATCH) await checkUnwriting();
        return;
      }
      const next = await snapshotStore(core, normalize);
      const changes = diffSnapshots(snapshot, next);
      snapshot = next;
      if (changes.length > 0) {
        if (status > 0 && status < 400) accepted.push(`${label} → ${status}`);
        else fail(`${status} and wrote to the store`, changes.slice(0, 4).join(', ') + (changes.length > 4 ? ` (+${changes.length - 4})` : ''));
      }
    };

    // Huge bodies that may be accepted go last: once stored, every later snapshot reads them again.
    const late = (c: Case) => c.expect === 'may' && c.body !== undefined && c.body.length > MiB;
    try {
      for (const c of walk) if (!late(c)) await run(c, 'admin');
      for (const c of narrowSample) await run(c, 'narrow');
      for (const c of walk) if (late(c)) await run(c, 'admin');
      await checkUnwriting();
    } finally {
      raw.destroy();
    }
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.log(
      `      malformed walk: ${requests} requests (${walk.length} with the admin key, ${narrowSample.length} with a narrow key) in ${seconds} s; ${accepted.length} odd inputs accepted`,
    );
    // WALK_VERBOSE=1 lists the odd inputs that were accepted; WALK_DUMP=<file> writes every answer.
    if (process.env.WALK_VERBOSE) for (const line of accepted) console.log(`        accepted: ${line}`);
    if (process.env.WALK_DUMP) writeFileSync(process.env.WALK_DUMP, `${dump.join('\n')}\n`);

    if (failures.length > 0) {
      const causes = new Map<string, string[]>();
      for (const f of failures) causes.set(f.cause, [...(causes.get(f.cause) ?? []), f.line]);
      const report = [...causes].map(([cause, lines]) => `  ${cause} (${lines.length}):\n${lines.map((l) => `    - ${l}`).join('\n')}`).join('\n');
      expect.fail(`${failures.length} malformed requests were mishandled:\n${report}`);
    }
  });
});
