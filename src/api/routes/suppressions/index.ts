import type { Suppressions } from '../../../accounts/suppressions.ts';
import type { SuppressionFilter } from '../../../store/suppressions-repo.ts';
import { badRequest } from '../../../util/errors.ts';
import { authOf } from '../../context.ts';
import { paginationInfo, parsePageQuery } from '../../pagination.ts';
import { parseBody, parseQuery } from '../../validate.ts';
import type { Route } from '../route.ts';
import { presentSuppression } from './presenter.ts';
import { createSuppressionBody, deleteSuppressionQuery, listSuppressionsQuery, wipeSuppressionsQuery } from './schema.ts';

export function suppressionRoutes(suppressions: Suppressions): Route[] {
  return [
    {
      operationId: 'getSuppressions',
      handler: async (ctx) => {
        const query = parseQuery(ctx, listSuppressionsQuery);
        const filter: Omit<SuppressionFilter, 'activeAt'> = {};
        if (query.domain !== undefined) filter.domain = query.domain;
        if (query.email !== undefined) filter.email = query.email;
        if (query.from_time !== undefined) filter.fromMs = Date.parse(query.from_time);
        if (query.to_time !== undefined) filter.toMs = Date.parse(query.to_time);
        if (filter.fromMs !== undefined && filter.toMs !== undefined && filter.fromMs > filter.toMs) {
          throw badRequest('from_time must not be after to_time');
        }
        const page = await suppressions.list(authOf(ctx).account.id, filter, parsePageQuery(ctx.query));
        ctx.body = { object: 'list', data: page.items.map(presentSuppression), pagination: paginationInfo(page) };
      },
    },
    {
      operationId: 'createSuppression',
      handler: async (ctx) => {
        const body = parseBody(ctx, createSuppressionBody);
        const created = await suppressions.create(authOf(ctx).account.id, {
          email: body.email,
          domain: body.domain,
          reason: body.reason,
          expiresAt: Date.parse(body.expires_at),
        });
        ctx.status = 201;
        ctx.body = { object: 'list', data: created.map(presentSuppression) };
      },
    },
    {
      operationId: 'deleteSuppression',
      handler: async (ctx) => {
        const query = parseQuery(ctx, deleteSuppressionQuery);
        const removed = await suppressions.remove(authOf(ctx).account.id, query.email, query.domain);
        ctx.body = { message: `${removed} suppression${removed === 1 ? '' : 's'} for ${query.email.toLowerCase()} deleted` };
      },
    },
    {
      operationId: 'deleteAllSuppressions',
      handler: async (ctx) => {
        const query = parseQuery(ctx, wipeSuppressionsQuery);
        const { removed, kept } = await suppressions.wipe(authOf(ctx).account.id, query.domain);
        const keptText = kept > 0 ? `; ${kept} protected (complaint) suppression${kept === 1 ? '' : 's'} kept` : '';
        ctx.body = { message: `${removed} suppression${removed === 1 ? '' : 's'} deleted${keptText}` };
      },
    },
  ];
}
