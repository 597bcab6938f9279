import type { Logger } from '../logging/logger.ts';
import { badRequest, notFound } from '../util/errors.ts';
import {
  ADMIN_INPUTS,
  type AdminOperation,
  type AdminOperations,
  type CreatedKey,
  type DomainView,
  type KeyView,
  type RotationView,
} from './admin-protocol.ts';

/**
 * What the daemon's log says of each change made through the control socket: ids and outcomes,
 * never an argument or a result whole (a created key's result holds its secret). Reads: nothing.
 */
const LOG_LINES: {
  [K in AdminOperation]?: (result: Awaited<ReturnType<AdminOperations[K]>>, input: Parameters<AdminOperations[K]>[0]) => [Record<string, unknown>, string];
} = {
  createAccount: (a) => [{ account_id: a.id }, 'operator created an account'],
  setAccountPool: (a) => [{ account_id: a.id, pool: a.delivery_pool }, "operator set an account's delivery pool"],
  createKey: (c: CreatedKey) => [{ account_id: c.key.account_id, key_id: c.key.id, kind: c.key.kind }, 'operator created an API key'],
  deleteKey: (k: KeyView) => [{ account_id: k.account_id, key_id: k.id }, 'operator deleted an API key'],
  addDomain: (d: DomainView) => [{ account_id: d.account_id, domain: d.name }, 'operator added a domain'],
  checkDomain: (d: DomainView) => [{ account_id: d.account_id, domain: d.name, dns_valid: d.dns_valid }, "operator checked a domain's DNS"],
  rotateDkim: (r: RotationView) => [{ account_id: r.domain.account_id, domain: r.domain.name, outcome: r.outcome }, 'operator asked for a DKIM rotation'],
  deleteCredential: (c, i) => [{ account_id: i.account, credential_id: c.id }, 'operator deleted an SMTP credential'],
  enableWebhook: (w, i) => [
    { account_id: i.account, webhook_id: w.id, enabled: w.enabled },
    w.enabled ? 'operator enabled a webhook' : 'operator disabled a webhook',
  ],
  deleteWebhook: (w, i) => [{ account_id: i.account, webhook_id: w.id }, 'operator deleted a webhook'],
  enableRoute: (r, i) => [{ account_id: i.account, route_id: r.id, enabled: r.enabled }, r.enabled ? 'operator enabled a route' : 'operator disabled a route'],
  deleteRoute: (r, i) => [{ account_id: i.account, route_id: r.id }, 'operator deleted a route'],
  deleteSuppression: (s, i) => [{ account_id: i.account, removed: s.removed }, "operator removed an address's suppressions"],
  verifyDomain: (d: DomainView) => [
    { account_id: d.account_id, domain: d.name, verified_by_hand: d.verified_by_hand !== null },
    d.verified_by_hand ? "operator marked a domain's DNS as verified by hand" : "operator cleared a domain's verified-by-hand mark",
  ],
};

const isOperation = (name: string): name is AdminOperation => Object.hasOwn(ADMIN_INPUTS, name);

/** Runs `POST /v1/admin/<operation>` with its JSON body: the argument checked, then the one implementation. */
export async function handleAdmin(name: string, body: unknown, admin: AdminOperations, log: Logger): Promise<unknown> {
  if (!isOperation(name)) throw notFound(`no such control operation: POST /v1/admin/${name}`);
  const parsed = ADMIN_INPUTS[name].safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
    throw badRequest(`${name}: ${where}${issue.message}`);
  }
  // The schema of `name` checked the argument of `name`: TypeScript cannot follow the pairing.
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called with admin as this, below
  const run = admin[name] as (input: unknown) => Promise<unknown>;
  const result = await run.call(admin, parsed.data);
  const line = LOG_LINES[name] as ((r: unknown, i: unknown) => [Record<string, unknown>, string]) | undefined;
  if (line) {
    const [fields, message] = line(result, parsed.data);
    log.info({ op: name, ...fields }, message);
  }
  return result;
}
