import { Command } from 'commander';
import { withCore } from './admin.ts';
import type { CliIo } from './main.ts';

export function accountCommands(program: Command, io: CliIo): Command {
  const accounts = new Command('accounts').description('manage accounts');
  accounts
    .command('create')
    .description('create an account with its owner')
    .requiredOption('--name <name>', 'account name')
    .requiredOption('--owner-email <email>', 'email of the account owner')
    .option('--website <url>', 'account website', 'https://localhost')
    .action(async (opts: { name: string; ownerEmail: string; website: string }) => {
      const account = await withCore(program, (core) =>
        core.accounts.create({ name: opts.name, website: opts.website, ownerEmail: opts.ownerEmail }),
      );
      io.out(`${account.id}\t${account.name}\n`);
    });
  accounts
    .command('list')
    .description('list accounts')
    .action(async () => {
      const list = await withCore(program, (core) => core.accounts.list());
      for (const a of list) io.out(`${a.id}\t${a.status}\t${a.name}\n`);
    });
  return accounts;
}
