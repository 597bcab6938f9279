import type { Command } from 'commander';
import type { CliIo } from './io.ts';
import { resourceCommands } from './resource-commands.ts';

/** `postilion smtp-credentials list|show|delete`: the credentials SMTP submission authenticates with. */
export function smtpCredentialCommands(program: Command, io: CliIo): Command {
  return resourceCommands(program, io, {
    name: 'smtp-credentials',
    description: 'SMTP submission credentials of an account (made through the API; the password is never shown again)',
    noun: 'SMTP credential',
    list: async (admin, account) => (await admin.listCredentials({ account })).credentials,
    line: (c) => [c.id, c.username, c.scope, c.domains.join(',') || '-', c.sandbox ? 'sandbox' : 'live', c.name],
    show: (admin, input) => admin.showCredential(input),
    delete: (admin, input) => admin.deleteCredential(input),
  });
}
