import type { Command } from 'commander';
import type { CliIo } from './io.ts';
import { resourceCommands } from './resource-commands.ts';

/** `postilion routes list|show|enable|disable|delete`: inbound mail POSTed to a URL. */
export function routeCommands(program: Command, io: CliIo): Command {
  return resourceCommands(program, io, {
    name: 'routes',
    description: 'inbound routes of an account (made through the API; the signing secret is never shown again); a disabled one holds its POSTs',
    noun: 'route',
    list: async (admin, account) => (await admin.listRoutes({ account })).routes,
    line: (r) => [r.id, r.enabled ? 'enabled' : 'disabled', r.recipient, r.url, r.name],
    show: (admin, input) => admin.showRoute(input),
    enable: (admin, input) => admin.enableRoute(input),
    delete: (admin, input) => admin.deleteRoute(input),
  });
}
