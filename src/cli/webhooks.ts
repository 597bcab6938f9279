import type { Command } from 'commander';
import type { CliIo } from './io.ts';
import { resourceCommands } from './resource-commands.ts';

/** `postilion webhooks list|show|enable|disable|delete`. */
export function webhookCommands(program: Command, io: CliIo): Command {
  return resourceCommands(program, io, {
    name: 'webhooks',
    description: 'webhooks of an account (made through the API; the signing secret is never shown again); a disabled one holds its deliveries',
    noun: 'webhook',
    list: async (admin, account) => (await admin.listWebhooks({ account })).webhooks,
    line: (w) => [w.id, w.enabled ? 'enabled' : 'disabled', w.url, `errors_since_last_success=${w.errors_since_last_success}`, w.name],
    show: (admin, input) => admin.showWebhook(input),
    enable: (admin, input) => admin.enableWebhook(input),
    delete: (admin, input) => admin.deleteWebhook(input),
  });
}
