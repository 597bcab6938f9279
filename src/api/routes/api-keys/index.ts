import type { ApiKeys } from '../../../accounts/api-keys.ts';
import { authOf } from '../../context.ts';
import { paginationInfo, parsePageQuery } from '../../pagination.ts';
import { parseBody, uuidParam } from '../../validate.ts';
import type { Route } from '../route.ts';
import { presentApiKey } from './presenter.ts';
import { createApiKeyBody, updateApiKeyBody } from './schema.ts';

export function apiKeyRoutes(apiKeys: ApiKeys): Route[] {
  return [
    {
      operationId: 'getAPIKeys',
      handler: async (ctx) => {
        const page = await apiKeys.list(authOf(ctx).account.id, parsePageQuery(ctx.query));
        ctx.body = { object: 'list', data: page.items.map(presentApiKey), pagination: paginationInfo(page) };
      },
    },
    {
      operationId: 'createAPIKey',
      handler: async (ctx) => {
        const body = parseBody(ctx, createApiKeyBody);
        const auth = authOf(ctx);
        const { key, secret } = await apiKeys.create(auth.account.id, {
          label: body.label,
          scopes: body.scopes,
          ipAllowList: body.ip_allow_list ?? [],
          grantor: auth.grants,
        });
        ctx.status = 201;
        ctx.body = { ...presentApiKey(key), secret_key: secret };
      },
    },
    {
      operationId: 'getAPIKey',
      handler: async (ctx) => {
        ctx.body = presentApiKey(await apiKeys.get(authOf(ctx).account.id, uuidParam(ctx, 'key_id')));
      },
    },
    {
      operationId: 'updateAPIKey',
      handler: async (ctx) => {
        const auth = authOf(ctx);
        const body = parseBody(ctx, updateApiKeyBody);
        const updated = await apiKeys.update(
          auth.account.id,
          uuidParam(ctx, 'key_id'),
          { label: body.label ?? undefined, scopes: body.scopes ?? undefined, ipAllowList: body.ip_allow_list ?? undefined },
          { keyId: auth.key.id, clientIp: ctx.state.clientIp, grants: auth.grants },
        );
        ctx.body = presentApiKey(updated);
      },
    },
    {
      operationId: 'deleteAPIKey',
      handler: async (ctx) => {
        const auth = authOf(ctx);
        const key = await apiKeys.delete(auth.account.id, uuidParam(ctx, 'key_id'), auth.grants);
        ctx.body = { message: `api key ${key.id} (${key.label}) deleted successfully` };
      },
    },
  ];
}
