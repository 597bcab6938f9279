import { satisfies } from '../../../accounts/scopes.ts';
import type { DnsChecker } from '../../../domains/dns-checker.ts';
import type { DomainSettings, Domains } from '../../../domains/domains.ts';
import type { DomainRecord } from '../../../store/records.ts';
import { forbidden } from '../../../util/errors.ts';
import { authOf, type ApiContext } from '../../context.ts';
import { operation } from '../../operations.ts';
import { paginationInfo, parsePageQuery } from '../../pagination.ts';
import { parseBody, parseQuery } from '../../validate.ts';
import type { Route } from '../route.ts';
import { presentDomain } from './presenter.ts';
import { createDomainBody, listDomainsQuery, updateDomainBody } from './schema.ts';

type SettingsBody = {
  tracking_subdomain?: string | undefined;
  return_path_subdomain?: string | undefined;
  subscription_subdomain?: string | undefined;
  media_subdomain?: string | undefined;
  dkim_rotation_interval_days?: number | null | undefined;
  dkim_selector?: string | null | undefined;
  dsn_recipient?: string | null | undefined;
};

function settings(body: SettingsBody): DomainSettings {
  const out: DomainSettings = {};
  if (body.tracking_subdomain !== undefined) out.trackingSubdomain = body.tracking_subdomain;
  if (body.return_path_subdomain !== undefined) out.returnPathSubdomain = body.return_path_subdomain;
  if (body.subscription_subdomain !== undefined) out.subscriptionSubdomain = body.subscription_subdomain;
  if (body.media_subdomain !== undefined) out.mediaSubdomain = body.media_subdomain;
  if (body.dkim_rotation_interval_days !== undefined) out.dkimRotationIntervalDays = body.dkim_rotation_interval_days;
  if (body.dkim_selector !== undefined) out.dkimSelector = body.dkim_selector;
  if (body.dsn_recipient !== undefined) out.dsnRecipient = body.dsn_recipient;
  return out;
}

export function domainRoutes(domains: Domains, checker: DnsChecker): Route[] {
  const present = (domain: DomainRecord) => presentDomain(domain, checker.records(domain));
  const name = (ctx: ApiContext) => ctx.params.domain ?? '';
  return [
    {
      operationId: 'getDomains',
      handler: async (ctx) => {
        const { dns_valid } = parseQuery(ctx, listDomainsQuery);
        const page = await domains.list(authOf(ctx).account.id, dns_valid === undefined ? undefined : dns_valid === 'true', parsePageQuery(ctx.query));
        ctx.body = { object: 'list', data: page.items.map(present), pagination: paginationInfo(page) };
      },
    },
    {
      operationId: 'createDomain',
      handler: async (ctx) => {
        const body = parseBody(ctx, createDomainBody);
        const domain = await domains.create(authOf(ctx).account.id, {
          name: body.domain,
          ...settings(body),
          ...(body.dkim_private_key !== undefined ? { dkimPrivateKey: body.dkim_private_key } : {}),
        });
        ctx.status = 201;
        ctx.body = present(domain);
      },
    },
    {
      operationId: 'getDomain',
      handler: async (ctx) => {
        ctx.body = present(await domains.get(authOf(ctx).account.id, name(ctx)));
      },
    },
    {
      operationId: 'updateDomain',
      handler: async (ctx) => {
        const body = parseBody(ctx, updateDomainBody);
        ctx.body = present(await domains.update(authOf(ctx).account.id, name(ctx), settings(body)));
      },
    },
    {
      operationId: 'deleteDomain',
      handler: async (ctx) => {
        const auth = authOf(ctx);
        const domain = await domains.get(auth.account.id, name(ctx));
        if (!satisfies(auth.grants, operation('deleteDomain').security, domain.name)) {
          throw forbidden('Insufficient permissions for the required scope');
        }
        await domains.delete(auth.account.id, domain.name);
        ctx.body = { message: `domain ${domain.name} deleted successfully` };
      },
    },
    {
      operationId: 'checkDomainDNS',
      handler: async (ctx) => {
        const domain = await domains.get(authOf(ctx).account.id, name(ctx));
        ctx.body = present(await checker.checkNow(domain));
      },
    },
  ];
}
