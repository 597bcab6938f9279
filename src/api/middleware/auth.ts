import type { Next } from 'koa';
import type { Accounts } from '../../accounts/accounts.ts';
import { SECRET_PATTERN, type ApiKeys } from '../../accounts/api-keys.ts';
import { allowListCovers } from '../../accounts/ip-allow-list.ts';
import { Grants, satisfies, type Security } from '../../accounts/scopes.ts';
import { AppError, badRequest, forbidden, unauthorized } from '../../util/errors.ts';
import type { ApiKeyRecord } from '../../store/records.ts';
import { isUuid } from '../../util/ids.ts';
import type { ApiContext } from '../context.ts';
import type { AnyRefusalLimiter } from './rate-limit.ts';

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Why a presented secret does not make a caller. */
export type AuthRefusal = 'malformed' | 'invalid' | 'other-account' | 'suspended' | 'deleted' | 'ip';

/**
 * The one authentication rule both API versions follow: a well-formed secret of a live key of
 * the given kind, whose account (when the path names one) is the path's and is active, called
 * from an address its allow list covers. On success the caller is set on the context.
 */
export async function identify(
  apiKeys: ApiKeys,
  accounts: Accounts,
  ctx: ApiContext,
  secret: string | undefined,
  kind: ApiKeyRecord['kind'],
): Promise<AuthRefusal | null> {
  if (secret === undefined || !SECRET_PATTERN.test(secret)) return 'malformed';
  return admitKey(accounts, ctx, await apiKeys.authenticate(secret), kind);
}

/**
 * The part of the rule after the secret: the key (found by its secret, or by the id a dashboard
 * session holds) is live and of the kind, its account is the path's and is active, and the
 * client's address is in its allow list. On success the caller is set on the context.
 */
export async function admitKey(accounts: Accounts, ctx: ApiContext, key: ApiKeyRecord | undefined, kind: ApiKeyRecord['kind']): Promise<AuthRefusal | null> {
  if (!key || key.kind !== kind) return 'invalid';
  const pathAccount = ctx.params.account_id;
  if (pathAccount !== undefined) {
    if (!isUuid(pathAccount)) throw badRequest('invalid account_id');
    if (pathAccount.toLowerCase() !== key.accountId) return 'other-account';
  }
  const account = await accounts.get(key.accountId);
  if (!account) return 'invalid';
  if (account.status === 'deleted') return 'deleted';
  // suspended, or parent-suspended: the contract's one answer for both.
  if (account.status !== 'active') return 'suspended';
  if (!allowListCovers(key.ipAllowList, ctx.state.clientIp)) return 'ip';
  ctx.state.auth = { key, account, grants: grantsOf(key) };
  // A silent logger (see requestContext) would serialise the binding for nothing.
  if (ctx.state.log.isLevelEnabled('fatal')) ctx.state.log.setBindings({ account_id: account.id });
  return null;
}

/** Key records come frozen from the store's cache, so their parsed grants can be kept with them. */
const parsedGrants = new WeakMap<ApiKeyRecord, Grants>();

function grantsOf(key: ApiKeyRecord): Grants {
  let grants = parsedGrants.get(key);
  if (!grants) {
    grants = new Grants(key.scopes.map((s) => s.scope));
    if (Object.isFrozen(key)) parsedGrants.set(key, grants);
  }
  return grants;
}

const V2_REFUSALS: Record<AuthRefusal, () => AppError> = {
  malformed: () => unauthorized('Missing or malformed bearer token'),
  invalid: () => unauthorized('Invalid API key'),
  'other-account': () => unauthorized('API key does not belong to this account'),
  suspended: () => unauthorized('Account is suspended'),
  deleted: () => unauthorized('Account has been deleted'),
  ip: () => forbidden('client IP address is not in the ip_allow_list of this API key'),
};

/** The v2 API's answer to a refused authentication. */
export function v2Refusal(refusal: AuthRefusal): AppError {
  return V2_REFUSALS[refusal]();
}

/** v2 authentication: `Authorization: Bearer <v2 key>`; 401, or 403 outside the allow list. */
export function authenticate(apiKeys: ApiKeys, accounts: Accounts) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    const refusal = await identify(apiKeys, accounts, ctx, BEARER.exec(ctx.get('authorization'))?.[1], 'v2');
    if (refusal) throw V2_REFUSALS[refusal]();
    await next();
  };
}

/**
 * Wraps authentication (v2's and v1's) in the per-address limit of refused authentications: an
 * address with no refusals left gets 429 before its key is hashed; a 401 or 403 raised before a
 * caller was identified counts as one refusal. Later errors (scopes, validation) do not count.
 */
export function limitRefusals(limiter: AnyRefusalLimiter) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    // In memory the answers are known at once: awaited only when they come from the cluster.
    const checked = limiter.check(ctx.state.clientIp);
    if (checked) await checked;
    try {
      await next();
    } catch (err) {
      if (!ctx.state.auth && err instanceof AppError && (err.status === 401 || err.status === 403)) {
        const counted = limiter.refused(ctx.state.clientIp);
        if (counted) await counted;
      }
      throw err;
    }
  };
}

/** The route-level scope gate: 403 unless one alternative could be met. */
export function requireScopes(security: Security) {
  // Not async: the chain (koa-compose) turns a throw into a rejection, and next's promise is passed on.
  return (ctx: ApiContext, next: Next): Promise<void> => {
    if (!satisfies(ctx.state.auth!.grants, security)) throw forbidden('Insufficient permissions for the required scope');
    return next();
  };
}
