import { Command } from 'commander';
import type { SuppressionView } from '../control/resource-protocol.ts';
import { onAdmin } from './admin.ts';
import type { CliIo } from './io.ts';
import { json } from './print.ts';

interface Options {
  account: string;
  domain?: string;
  json?: boolean;
}

const line = (s: SuppressionView) => `${[s.email, s.domain, s.expires_at, s.protected ? 'protected' : '-', s.reason].join('\t')}\n`;

/** `postilion suppressions list|show|delete`: addresses an account's mail is not sent to, per sender domain. */
export function suppressionCommands(program: Command, io: CliIo): Command {
  const group = new Command('suppressions').description('addresses an account does not send to, per sender domain (bounces, failures, complaints, the API)');
  const options = (command: Command, domain: string) =>
    command.requiredOption('--account <id>', 'account id').option('--domain <domain>', domain).option('--json', 'print JSON');

  options(
    group.command('list').description('list the suppressions in force: email, sender domain, until, protected (a complaint), reason'),
    'only those for this sender domain',
  ).action(async (opts: Options) => {
    const { suppressions } = await onAdmin(program, (admin) => admin.listSuppressions({ account: opts.account, domain: opts.domain }));
    io.out(opts.json ? json(suppressions) : suppressions.map(line).join(''));
  });
  options(
    group.command('show').description("an address's suppressions in force, one per sender domain").argument('<email>', 'the suppressed address'),
    'only the one for this sender domain',
  ).action(async (email: string, opts: Options) => {
    const { suppressions } = await onAdmin(program, (admin) => admin.showSuppression({ account: opts.account, email, domain: opts.domain }));
    io.out(opts.json ? json(suppressions) : suppressions.map(line).join(''));
  });
  options(
    group.command('delete').description("remove an address's suppressions, so mail to it is sent again").argument('<email>', 'the suppressed address'),
    'only the one for this sender domain',
  ).action(async (email: string, opts: Options) => {
    const result = await onAdmin(program, (admin) => admin.deleteSuppression({ account: opts.account, email, domain: opts.domain }));
    io.out(opts.json ? json(result) : `removed ${result.removed} suppression${result.removed === 1 ? '' : 's'} of ${result.email}\n`);
  });
  return group;
}
