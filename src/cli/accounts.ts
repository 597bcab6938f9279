import { Command } from 'commander';
import { onAdmin } from './admin.ts';
import type { CliIo } from './main.ts';

/** `postilion accounts …`: on the running daemon, or on the store when it is stopped. */
export function accountCommands(program: Command, io: CliIo): Command {
  const accounts = new Command('accounts').description('manage accounts');
  accounts
    .command('create')
    .description('create an account with its owner')
    .requiredOption('--name <name>', 'account name')
    .requiredOption('--owner-email <email>', 'email of the account owner')
    .option('--website <url>', 'account website', 'https://localhost')
    .action(async (opts: { name: string; ownerEmail: string; website: string }) => {
      const account = await onAdmin(program, (admin) => admin.createAccount({ name: opts.name, owner_email: opts.ownerEmail, website: opts.website }));
      io.out(`${account.id}\t${account.name}\n`);
    });
  accounts
    .command('list')
    .description('list accounts')
    .action(async () => {
      const { accounts: list } = await onAdmin(program, (admin) => admin.listAccounts({}));
      for (const a of list) io.out(`${a.id}\t${a.status}\t${a.name}\n`);
    });
  return accounts;
}
