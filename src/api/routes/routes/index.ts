import { satisfies, type Grants } from '../../../accounts/scopes.ts';
import type { MayUse, Routes } from '../../../inbound/routes.ts';
import { normalizeDomain } from '../../../util/domain-name.ts';
import { badRequest, forbidden } from '../../../util/errors.ts';
import { authOf } from '../../context.ts';
import { operation, type OperationId } from '../../operations.ts';
import { paginationInfo, parsePageQuery } from '../../pagination.ts';
import { parseBody, parseQuery, uuidParam } from '../../validate.ts';
import type { Route } from '../route.ts';
import { presentRoute } from './presenter.ts';
import { createRouteBody, listRoutesQuery, updateRouteBody } from './schema.ts';

/**
 * A route is reached through the domain of its recipient: `routes:<verb>:all`, or the domain
 * role. Listing with a domain-scoped key needs `domain`.
 */
export function routeRoutes(routes: Routes): Route[] {
  const may =
    (grants: Grants, id: OperationId): MayUse =>
    (domain) =>
      satisfies(grants, operation(id).security, domain);
  return [
    {
      operationId: 'getRoutes',
      handler: async (ctx) => {
        const { grants, account } = authOf(ctx);
        const query = parseQuery(ctx, listRoutesQuery);
        const page = parsePageQuery(ctx.query);
        const domain = query.domain === undefined ? undefined : normalizeDomain(query.domain);
        if (!grants.holdsAll('routes:read')) {
          if (domain === undefined) throw badRequest('domain is required when listing routes with a domain-scoped API key');
          if (!satisfies(grants, operation('getRoutes').security, domain))
            throw forbidden(`api key does not have sufficient permissions to read routes of ${domain}`);
        }
        const found = await routes.list(account.id, domain, page);
        ctx.body = { object: 'list', data: found.items.map(presentRoute), pagination: paginationInfo(found) };
      },
    },
    {
      operationId: 'createRoute',
      handler: async (ctx) => {
        const body = parseBody(ctx, createRouteBody);
        const { grants, account } = authOf(ctx);
        const { route, secret } = await routes.create(
          account.id,
          {
            name: body.name,
            url: body.url,
            recipient: body.recipient,
            attachments: body.attachments,
            headers: body.headers,
            groupByMessageId: body.group_by_message_id,
            stripReplies: body.strip_replies,
            enabled: body.enabled,
          },
          may(grants, 'createRoute'),
        );
        ctx.status = 201;
        ctx.body = { ...presentRoute(route), secret };
      },
    },
    {
      operationId: 'getRoute',
      handler: async (ctx) => {
        const { grants, account } = authOf(ctx);
        ctx.body = presentRoute(await routes.get(account.id, uuidParam(ctx, 'route_id'), may(grants, 'getRoute')));
      },
    },
    {
      operationId: 'updateRoute',
      handler: async (ctx) => {
        const { grants, account } = authOf(ctx);
        const id = uuidParam(ctx, 'route_id');
        const body = parseBody(ctx, updateRouteBody);
        const route = await routes.update(
          account.id,
          id,
          {
            ...(body.name != null ? { name: body.name } : {}),
            ...(body.url != null ? { url: body.url } : {}),
            ...(body.recipient != null ? { recipient: body.recipient } : {}),
            ...(body.attachments != null ? { attachments: body.attachments } : {}),
            ...(body.headers != null ? { headers: body.headers } : {}),
            ...(body.group_by_message_id != null ? { groupByMessageId: body.group_by_message_id } : {}),
            ...(body.strip_replies != null ? { stripReplies: body.strip_replies } : {}),
            ...(body.enabled != null ? { enabled: body.enabled } : {}),
          },
          may(grants, 'updateRoute'),
        );
        ctx.body = presentRoute(route);
      },
    },
    {
      operationId: 'deleteRoute',
      handler: async (ctx) => {
        const { grants, account } = authOf(ctx);
        const route = await routes.delete(account.id, uuidParam(ctx, 'route_id'), may(grants, 'deleteRoute'));
        ctx.body = { message: `route ${route.id} (${route.name}) deleted successfully` };
      },
    },
  ];
}
