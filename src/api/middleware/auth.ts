import type { Next } from 'koa';
import type { Accounts } from '../../accounts/accounts.ts';
import { SECRET_PATTERN, type ApiKeys } from '../../accounts/api-keys.ts';
import { allowListCovers } from '../../accounts/ip-allow-list.ts';
import { Grants, satisfies, type Security } from '../../accounts/scopes.ts';
import { badRequest, forbidden, unauthorized } from '../../util/errors.ts';
import { isUuid } from '../../util/ids.ts';
import type { ApiContext } from '../context.ts';

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * v2 authentication: a Bearer secret of a live v2 key, whose account (when the path names one)
 * is the path's account and is active, called from an address its allow list covers.
 */
export function authenticate(apiKeys: ApiKeys, accounts: Accounts) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    const match = BEARER.exec(ctx.get('authorization'));
    if (!match || !SECRET_PATTERN.test(match[1]!)) throw unauthorized('Missing or malformed bearer token');
    const key = await apiKeys.authenticate(match[1]!);
    if (!key || key.kind !== 'v2') throw unauthorized('Invalid API key');
    const pathAccount = ctx.params.account_id;
    if (pathAccount !== undefined) {
      if (!isUuid(pathAccount)) throw badRequest('invalid account_id');
      if (pathAccount.toLowerCase() !== key.accountId) throw unauthorized('API key does not belong to this account');
    }
    const account = await accounts.get(key.accountId);
    if (!account) throw unauthorized('Invalid API key');
    if (account.status !== 'active') throw unauthorized('Account is suspended');
    if (!allowListCovers(key.ipAllowList, ctx.state.clientIp)) {
      throw forbidden('client IP address is not in the ip_allow_list of this API key');
    }
    ctx.state.auth = { key, account, grants: new Grants(key.scopes.map((s) => s.scope)) };
    ctx.state.log = ctx.state.log.child({ account_id: account.id });
    await next();
  };
}

/** The route-level scope gate: 403 unless one alternative could be met. */
export function requireScopes(security: Security) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    if (!satisfies(ctx.state.auth!.grants, security)) throw forbidden('Insufficient permissions for the required scope');
    await next();
  };
}
