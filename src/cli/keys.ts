import { Command } from 'commander';
import { EVERY_GLOBAL_SCOPE } from '../accounts/scopes.ts';
import { everyItem } from '../store/page.ts';
import { accountId, withCore } from './admin.ts';
import type { CliIo } from './main.ts';

const collect = (value: string, previous: string[]) => [...previous, value];

export function keyCommands(program: Command, io: CliIo): Command {
  const keys = new Command('keys').description('manage API keys');
  keys
    .command('create')
    .description('create an API key; the secret is printed once')
    .requiredOption('--account <id>', 'account id')
    .requiredOption('--label <label>', 'label')
    .option('--scope <scope>', 'a scope (repeatable; default: every scope)', collect, [])
    .option('--ip <cidr>', 'allowed client address or CIDR block (repeatable)', collect, [])
    .option('--v1', 'a key for the legacy POST /v1/email/send (X-Api-Key); default scope messages:send:all')
    .action(async (opts: { account: string; label: string; scope: string[]; ip: string[]; v1?: boolean }) => {
      const id = accountId(opts.account);
      const { key, secret } = await withCore(program, async (core) => {
        await core.accounts.require(id);
        const defaults = opts.v1 ? ['messages:send:all'] : EVERY_GLOBAL_SCOPE;
        return core.apiKeys.create(id, {
          label: opts.label,
          scopes: opts.scope.length > 0 ? opts.scope : defaults,
          ipAllowList: opts.ip,
          kind: opts.v1 ? 'v1' : 'v2',
        });
      });
      io.out(`key id: ${key.id}\nAPI key (shown once): ${secret}\n`);
    });
  keys
    .command('list')
    .description('list the API keys of an account')
    .requiredOption('--account <id>', 'account id')
    .action(async (opts: { account: string }) => {
      const id = accountId(opts.account);
      await withCore(program, async (core) => {
        await core.accounts.require(id);
        for await (const k of everyItem((req) => core.apiKeys.list(id, req))) {
          io.out(`${k.id}\t${k.label}\t${k.scopes.map((s) => s.scope).join(',')}\n`);
        }
      });
    });
  keys
    .command('delete')
    .description('delete an API key')
    .requiredOption('--account <id>', 'account id')
    .requiredOption('--key <id>', 'key id')
    .action(async (opts: { account: string; key: string }) => {
      const key = await withCore(program, (core) => core.apiKeys.delete(accountId(opts.account), opts.key.toLowerCase()));
      io.out(`deleted ${key.id} (${key.label})\n`);
    });
  return keys;
}
