import type { SubAccounts } from '../../../accounts/sub-accounts.ts';
import type { Usage } from '../../../accounts/usage.ts';
import type { AccountRecord } from '../../../store/records.ts';
import { authOf } from '../../context.ts';
import { paginationInfo, parsePageQuery } from '../../pagination.ts';
import { parseBody, uuidParam } from '../../validate.ts';
import { presentApiKey } from '../api-keys/presenter.ts';
import { createApiKeyBody, updateApiKeyBody } from '../api-keys/schema.ts';
import type { Route } from '../route.ts';
import { presentSubAccount, presentUsage } from './presenter.ts';
import { createSubAccountBody, suspendSubAccountBody, updateSubAccountBody } from './schema.ts';

/** reference-api §10: everything under the parent's id; the caller's account is the parent. */
export function subAccountRoutes(subAccounts: SubAccounts, usage: Usage): Route[] {
  const present = async (a: AccountRecord) => presentSubAccount(a, await subAccounts.figures(a));
  return [
    {
      operationId: 'listSubAccounts',
      handler: async (ctx) => {
        const page = await subAccounts.list(authOf(ctx).account, parsePageQuery(ctx.query));
        ctx.body = { object: 'list', data: await Promise.all(page.items.map(present)), pagination: paginationInfo(page) };
      },
    },
    {
      operationId: 'createSubAccount',
      handler: async (ctx) => {
        const body = parseBody(ctx, createSubAccountBody);
        const child = await subAccounts.create(authOf(ctx).account, { name: body.name, website: body.website, monthlyCredit: body.monthly_credit });
        ctx.status = 201;
        ctx.body = await present(child);
      },
    },
    {
      operationId: 'getSubAccountsUsage',
      handler: async (ctx) => {
        const parent = authOf(ctx).account;
        subAccounts.mayHaveChildren(parent);
        ctx.body = presentUsage(await usage.report(parent));
      },
    },
    {
      operationId: 'getSubAccount',
      handler: async (ctx) => {
        ctx.body = await present(await subAccounts.get(authOf(ctx).account, uuidParam(ctx, 'sub_account_id')));
      },
    },
    {
      operationId: 'updateSubAccount',
      handler: async (ctx) => {
        const body = parseBody(ctx, updateSubAccountBody);
        const child = await subAccounts.update(authOf(ctx).account, uuidParam(ctx, 'sub_account_id'), {
          name: body.name ?? undefined,
          website: body.website ?? undefined,
          monthlyCredit: body.monthly_credit ?? undefined,
        });
        ctx.body = await present(child);
      },
    },
    {
      operationId: 'deleteSubAccount',
      handler: async (ctx) => {
        await subAccounts.delete(authOf(ctx).account, uuidParam(ctx, 'sub_account_id'));
        ctx.body = { message: 'sub account deleted' };
      },
    },
    {
      operationId: 'suspendSubAccount',
      handler: async (ctx) => {
        const body = parseBody(ctx, suspendSubAccountBody);
        ctx.body = await present(await subAccounts.suspend(authOf(ctx).account, uuidParam(ctx, 'sub_account_id'), body.reason));
      },
    },
    {
      operationId: 'unsuspendSubAccount',
      handler: async (ctx) => {
        ctx.body = await present(await subAccounts.unsuspend(authOf(ctx).account, uuidParam(ctx, 'sub_account_id')));
      },
    },
    {
      operationId: 'listSubAccountAPIKeys',
      handler: async (ctx) => {
        const page = await subAccounts.listKeys(authOf(ctx).account, uuidParam(ctx, 'sub_account_id'), parsePageQuery(ctx.query));
        ctx.body = { object: 'list', data: page.items.map(presentApiKey), pagination: paginationInfo(page) };
      },
    },
    {
      operationId: 'createSubAccountAPIKey',
      handler: async (ctx) => {
        const body = parseBody(ctx, createApiKeyBody);
        const { key, secret } = await subAccounts.createKey(authOf(ctx).account, uuidParam(ctx, 'sub_account_id'), {
          label: body.label,
          scopes: body.scopes,
          ipAllowList: body.ip_allow_list ?? [],
        });
        ctx.status = 201;
        ctx.body = { ...presentApiKey(key), secret_key: secret };
      },
    },
    {
      operationId: 'getSubAccountAPIKey',
      handler: async (ctx) => {
        ctx.body = presentApiKey(await subAccounts.getKey(authOf(ctx).account, uuidParam(ctx, 'sub_account_id'), uuidParam(ctx, 'key_id')));
      },
    },
    {
      operationId: 'updateSubAccountAPIKey',
      handler: async (ctx) => {
        const body = parseBody(ctx, updateApiKeyBody);
        const key = await subAccounts.updateKey(authOf(ctx).account, uuidParam(ctx, 'sub_account_id'), uuidParam(ctx, 'key_id'), {
          label: body.label ?? undefined,
          scopes: body.scopes ?? undefined,
          ipAllowList: body.ip_allow_list ?? undefined,
        });
        ctx.body = presentApiKey(key);
      },
    },
    {
      operationId: 'deleteSubAccountAPIKey',
      handler: async (ctx) => {
        const key = await subAccounts.deleteKey(authOf(ctx).account, uuidParam(ctx, 'sub_account_id'), uuidParam(ctx, 'key_id'));
        ctx.body = { message: `api key ${key.id} (${key.label}) deleted successfully` };
      },
    },
  ];
}
