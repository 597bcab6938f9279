import { Command } from 'commander';
import { onAdmin } from './admin.ts';
import { badRequest } from '../util/errors.ts';
import type { CliIo } from './io.ts';

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
    .description('list accounts: id, status, parent (- for a top-level account), name')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const { accounts: list } = await onAdmin(program, (admin) => admin.listAccounts({}));
      if (opts.json) return io.out(`${JSON.stringify(list, null, 2)}\n`);
      for (const a of list)
        io.out(
          `${a.id}\t${a.status}\t${a.parent_account_id ?? '-'}\t${a.name}${a.suspension ? `\t(suspended by ${a.suspension.by}: ${a.suspension.reason})` : ''}\n`,
        );
    });
  accounts
    .command('suspend')
    .description(
      'suspend an account: its API keys get 401, its SMTP credentials 535, its queued mail is held (not sent, not lost); a top-level account takes its active sub accounts with it',
    )
    .argument('<id>', 'account id')
    .requiredOption('--reason <text>', 'why (1 to 500 characters; shown in accounts list)')
    .action(async (id: string, opts: { reason: string }) => {
      const a = await onAdmin(program, (admin) => admin.suspendAccount({ account: id, reason: opts.reason }));
      io.out(`${a.id}\t${a.status}\n`);
    });
  accounts
    .command('unsuspend')
    .description('make a suspended account active again (with the sub accounts suspended with it); its held mail goes out')
    .argument('<id>', 'account id')
    .action(async (id: string) => {
      const a = await onAdmin(program, (admin) => admin.unsuspendAccount({ account: id }));
      io.out(`${a.id}\t${a.status}\n`);
    });
  accounts
    .command('smtp-header-from')
    .description(
      "own (the default): the header From of the account's mail submitted over SMTP must be at a domain its credential may send from (550 5.7.1 otherwise), so what Postilion signs aligns for DMARC; any: it may be anywhere (forwarding set-ups; such mail is signed with the MAIL FROM domain and may fail DMARC)",
    )
    .argument('<id>', 'account id')
    .argument('<own|any>', 'the setting')
    .action(async (id: string, value: string) => {
      const a = await onAdmin(program, (admin) => admin.setSmtpHeaderFrom({ account: id, smtp_header_from: value }));
      io.out(`${a.id}\tsmtp_header_from=${a.smtp_header_from}\n`);
    });
  accounts
    .command('pool')
    .description(
      "set the delivery pool (delivery.pools) an account's mail leaves from, kept in the store (every node, every start); its sub accounts without one of their own send from it too",
    )
    .argument('<id>', 'account id')
    .argument('[pool]', 'pool name; none with --clear')
    .option('--clear', 'forget the pool set here: delivery.account_pools or the default pool applies again')
    .action(async (id: string, pool: string | undefined, opts: { clear?: boolean }) => {
      if (opts.clear ? pool !== undefined : pool === undefined) throw badRequest('give a pool name, or --clear (not both)');
      const a = await onAdmin(program, (admin) => admin.setAccountPool({ account: id, pool: opts.clear ? null : pool! }));
      io.out(`${a.id}\t${a.delivery_pool ?? '-'}\n`);
    });
  return accounts;
}
