import type { SmtpCredentialRecord } from '../../../store/records.ts';

/** `domains`: the associated domains that still exist (see SmtpCredentials.domainsOf). */
export function presentSmtpCredential(credential: SmtpCredentialRecord, domains: string[]) {
  return {
    object: 'credential_smtp' as const,
    id: credential.id,
    created_at: credential.createdAt,
    updated_at: credential.updatedAt,
    name: credential.name,
    username: credential.username,
    sandbox: credential.sandbox,
    scope: credential.scope,
    domains,
  };
}
