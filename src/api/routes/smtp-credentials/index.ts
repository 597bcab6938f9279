import { satisfies, type Grants } from '../../../accounts/scopes.ts';
import type { SmtpCredentials } from '../../../accounts/smtp-credentials.ts';
import type { Domains } from '../../../domains/domains.ts';
import type { SmtpCredentialRecord } from '../../../store/records.ts';
import { forbidden } from '../../../util/errors.ts';
import { authOf, type ApiContext } from '../../context.ts';
import { operation } from '../../operations.ts';
import { paginationInfo, parsePageQuery } from '../../pagination.ts';
import { parseBody, uuidParam } from '../../validate.ts';
import type { Route } from '../route.ts';
import { presentSmtpCredential } from './presenter.ts';
import { createSmtpCredentialBody } from './schema.ts';

/**
 * A credential is reached through its associated domains: `…:all` reaches every credential, a
 * domain role only those associated with one of its domains (never a global credential).
 */
export function smtpCredentialRoutes(credentials: SmtpCredentials, domains: Domains): Route[] {
  const present = async (credential: SmtpCredentialRecord) => presentSmtpCredential(credential, await credentials.domainsOf(credential));
  const reaches = async (grants: Grants, id: 'getSMTPCredential' | 'deleteSMTPCredential', credential: SmtpCredentialRecord) =>
    grants.holdsAll(id === 'getSMTPCredential' ? 'smtp-credentials:read' : 'smtp-credentials:delete') ||
    (await credentials.domainsOf(credential)).some((domain) => satisfies(grants, operation(id).security, domain));

  /** The ids of the domains a domain-scoped key may read credentials of; null for `:all`. */
  const readableDomainIds = async (ctx: ApiContext): Promise<string[] | null> => {
    const auth = authOf(ctx);
    if (auth.grants.holdsAll('smtp-credentials:read')) return null;
    const found = await Promise.all(auth.grants.domainsFor('smtp-credentials:read').map((name) => domains.find(auth.account.id, name)));
    return found.filter((d) => d !== undefined).map((d) => d.id);
  };

  return [
    {
      operationId: 'getSMTPCredentials',
      handler: async (ctx) => {
        const page = await credentials.list(authOf(ctx).account.id, await readableDomainIds(ctx), parsePageQuery(ctx.query));
        ctx.body = { object: 'list', data: await Promise.all(page.items.map(present)), pagination: paginationInfo(page) };
      },
    },
    {
      operationId: 'createSMTPCredential',
      handler: async (ctx) => {
        const body = parseBody(ctx, createSmtpCredentialBody);
        const { grants, account } = authOf(ctx);
        const { credential, password } = await credentials.create(
          account.id,
          { name: body.name, scope: body.scope, sandbox: body.sandbox, domains: body.domains ?? [] },
          (domain) => (domain === null ? grants.holdsAll('smtp-credentials:write') : satisfies(grants, operation('createSMTPCredential').security, domain)),
        );
        ctx.status = 201;
        ctx.body = { ...(await present(credential)), password };
      },
    },
    {
      operationId: 'getSMTPCredential',
      handler: async (ctx) => {
        const auth = authOf(ctx);
        const credential = await credentials.get(auth.account.id, uuidParam(ctx, 'smtp_credential_id'));
        if (!(await reaches(auth.grants, 'getSMTPCredential', credential))) {
          throw forbidden('this API key may not read SMTP credentials of these domains');
        }
        ctx.body = await present(credential);
      },
    },
    {
      operationId: 'deleteSMTPCredential',
      handler: async (ctx) => {
        const auth = authOf(ctx);
        const credential = await credentials.get(auth.account.id, uuidParam(ctx, 'smtp_credential_id'));
        if (!(await reaches(auth.grants, 'deleteSMTPCredential', credential))) {
          throw forbidden('this API key may not delete SMTP credentials of these domains');
        }
        await credentials.delete(auth.account.id, credential.id);
        ctx.body = { message: `smtp credential ${credential.id} (${credential.name}) deleted successfully` };
      },
    },
  ];
}
