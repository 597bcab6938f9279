import { Command } from 'commander';
import { onAdmin } from './admin.ts';
import type { CliIo } from './io.ts';

/** A repeatable option; no default given to commander, which would print "(default: [])". */
const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

/** `postilion keys …`: on the running daemon, or on the store when it is stopped. */
export function keyCommands(program: Command, io: CliIo): Command {
  const keys = new Command('keys').description('manage API keys');
  keys
    .command('create')
    .description('create an API key; the secret is printed once')
    .requiredOption('--account <id>', 'account id')
    .requiredOption('--label <label>', 'label')
    .option(
      '--scope <scope>',
      'a scope (repeatable; default: every scope that names no domain, which leaves out the wildcard "*"; with --v1: messages:send:all)',
      collect,
    )
    .option('--ip <cidr>', 'allowed client address or CIDR block (repeatable; default: any address)', collect)
    .option('--v1', 'a key for the legacy POST /v1/email/send, sent as X-Api-Key (default scope: messages:send:all)')
    .action(async (opts: { account: string; label: string; scope?: string[]; ip?: string[]; v1?: boolean }) => {
      const { key, secret } = await onAdmin(program, (admin) =>
        admin.createKey({ account: opts.account, label: opts.label, scopes: opts.scope ?? [], ip_allow_list: opts.ip ?? [], v1: opts.v1 === true }),
      );
      io.out(`key id: ${key.id}\nAPI key (shown once): ${secret}\n`);
    });
  keys
    .command('list')
    .description('list the API keys of an account')
    .requiredOption('--account <id>', 'account id')
    .action(async (opts: { account: string }) => {
      const { keys: list } = await onAdmin(program, (admin) => admin.listKeys({ account: opts.account }));
      for (const k of list) io.out(`${k.id}\t${k.label}\t${k.scopes.join(',')}\n`);
    });
  keys
    .command('delete')
    .description('delete an API key')
    .requiredOption('--account <id>', 'account id')
    .requiredOption('--key <id>', 'key id')
    .action(async (opts: { account: string; key: string }) => {
      const key = await onAdmin(program, (admin) => admin.deleteKey({ account: opts.account, key: opts.key }));
      io.out(`deleted ${key.id} (${key.label})\n`);
    });
  return keys;
}
