import { satisfies, type Grants } from '../../../accounts/scopes.ts';
import { WEBHOOK_FLAGS, type WebhookRecord } from '../../../store/records.ts';
import { forbidden } from '../../../util/errors.ts';
import type { MayWrite, WebhookFlags, Webhooks } from '../../../webhooks/webhooks.ts';
import { authOf } from '../../context.ts';
import { operation, type OperationId } from '../../operations.ts';
import { paginationInfo, parsePageQuery } from '../../pagination.ts';
import { parseBody, parseQuery, uuidParam } from '../../validate.ts';
import type { Route } from '../route.ts';
import { presentWebhook } from './presenter.ts';
import { createWebhookBody, listWebhooksQuery, updateWebhookBody } from './schema.ts';

/**
 * A webhook is reached through its associated domains. Reading: `webhooks:read:all`, or a
 * domain role on one of its domains (as the list shows it). Writing and deleting: `…:all`, or a
 * domain role on every one of its domains, before and after the change; a global webhook (or a
 * scoped one left without domains) needs `…:all`.
 */
export function webhookRoutes(webhooks: Webhooks): Route[] {
  const present = async (webhook: WebhookRecord) => presentWebhook(webhook, await webhooks.domainsOf(webhook));
  const mayWrite =
    (grants: Grants, id: OperationId, family: 'webhooks:write' | 'webhooks:delete'): MayWrite =>
    (domain) =>
      domain === null ? grants.holdsAll(family) : satisfies(grants, operation(id).security, domain);
  const mayRead = async (grants: Grants, webhook: WebhookRecord) =>
    grants.holdsAll('webhooks:read') || (await webhooks.domainsOf(webhook)).some((domain) => satisfies(grants, operation('getWebhook').security, domain));

  return [
    {
      operationId: 'getWebhooks',
      handler: async (ctx) => {
        const { grants, account } = authOf(ctx);
        const query = parseQuery(ctx, listWebhooksQuery);
        const page = parsePageQuery(ctx.query);
        const flags: Partial<WebhookFlags> = {};
        for (const flag of WEBHOOK_FLAGS) if (query[flag] !== undefined) flags[flag] = query[flag];
        const readable = grants.holdsAll('webhooks:read') ? null : grants.domainsFor('webhooks:read');
        const found = await webhooks.list(account.id, readable, { ...(query.enabled !== undefined ? { enabled: query.enabled } : {}), flags }, page);
        ctx.body = { object: 'list', data: await Promise.all(found.items.map(present)), pagination: paginationInfo(found) };
      },
    },
    {
      operationId: 'createWebhook',
      handler: async (ctx) => {
        const body = parseBody(ctx, createWebhookBody);
        const { grants, account } = authOf(ctx);
        const flags = Object.fromEntries(WEBHOOK_FLAGS.map((flag) => [flag, body[flag]])) as WebhookFlags;
        const { webhook, secret } = await webhooks.create(
          account.id,
          { name: body.name, url: body.url, scope: body.scope, enabled: body.enabled, flags, domains: body.domains ?? [] },
          mayWrite(grants, 'createWebhook', 'webhooks:write'),
        );
        ctx.status = 201;
        ctx.body = { ...(await present(webhook)), secret };
      },
    },
    {
      operationId: 'getWebhook',
      handler: async (ctx) => {
        const auth = authOf(ctx);
        const webhook = await webhooks.get(auth.account.id, uuidParam(ctx, 'webhook_id'));
        if (!(await mayRead(auth.grants, webhook))) throw forbidden('api key does not have sufficient permissions to read webhooks of these domains');
        ctx.body = await present(webhook);
      },
    },
    {
      operationId: 'updateWebhook',
      handler: async (ctx) => {
        const { grants, account } = authOf(ctx);
        const id = uuidParam(ctx, 'webhook_id');
        const body = parseBody(ctx, updateWebhookBody);
        const flags: Partial<WebhookFlags> = {};
        for (const flag of WEBHOOK_FLAGS) if (body[flag] != null) flags[flag] = body[flag];
        const webhook = await webhooks.update(
          account.id,
          id,
          {
            ...(body.name != null ? { name: body.name } : {}),
            ...(body.url != null ? { url: body.url } : {}),
            ...(body.enabled != null ? { enabled: body.enabled } : {}),
            ...(body.scope != null ? { scope: body.scope } : {}),
            ...(body.domains != null ? { domains: body.domains } : {}),
            flags,
          },
          mayWrite(grants, 'updateWebhook', 'webhooks:write'),
        );
        ctx.body = await present(webhook);
      },
    },
    {
      operationId: 'deleteWebhook',
      handler: async (ctx) => {
        const { grants, account } = authOf(ctx);
        const webhook = await webhooks.delete(account.id, uuidParam(ctx, 'webhook_id'), mayWrite(grants, 'deleteWebhook', 'webhooks:delete'));
        ctx.body = { message: `webhook ${webhook.id} (${webhook.name}) deleted successfully` };
      },
    },
  ];
}
