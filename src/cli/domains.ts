import { Command } from 'commander';
import type { PresentedRecord } from '../domains/dns-checker.ts';
import type { Core } from '../daemon.ts';
import type { DomainRecord } from '../store/records.ts';
import { badRequest } from '../util/errors.ts';
import { everyItem } from '../store/page.ts';
import { accountId, withCore } from './admin.ts';
import type { CliIo } from './main.ts';

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n)) throw badRequest(`"${value}" is not a whole number`);
  return n;
}

/** The records as a table an operator can copy into a zone. */
function printRecords(io: CliIo, core: Core, domain: DomainRecord): void {
  const records: PresentedRecord[] = core.dnsChecker.records(domain);
  io.out(`${domain.name}  dns_valid=${domain.dns.valid}  last check: ${domain.dns.checkedAt ?? 'never'}\n`);
  for (const r of records) {
    const state = r.propagated ? 'ok     ' : 'missing';
    io.out(`  [${state}] ${r.required ? 'required' : 'optional'}  ${r.type.padEnd(5)} ${r.host}\n            ${r.content}\n            (${r.label})\n`);
  }
}

export function domainCommands(program: Command, io: CliIo): Command {
  const domains = new Command('domains').description('manage sending domains');
  domains
    .command('add')
    .description('add a domain to an account and print the DNS records to publish')
    .argument('<domain>', 'domain name')
    .requiredOption('--account <id>', 'account id')
    .option('--rotation-days <n>', 'rotate the DKIM key every n days', positiveInt)
    .option('--selector <selector>', 'DKIM selector of the first key')
    .action(async (name: string, opts: { account: string; rotationDays?: number; selector?: string }) => {
      await withCore(program, async (core) => {
        const id = accountId(opts.account);
        await core.accounts.require(id);
        const domain = await core.domains.create(id, {
          name,
          ...(opts.rotationDays !== undefined ? { dkimRotationIntervalDays: opts.rotationDays } : {}),
          ...(opts.selector !== undefined ? { dkimSelector: opts.selector } : {}),
        });
        printRecords(io, core, domain);
      });
    });
  domains
    .command('list')
    .description('list the domains of an account')
    .requiredOption('--account <id>', 'account id')
    .action(async (opts: { account: string }) => {
      await withCore(program, async (core) => {
        const id = accountId(opts.account);
        for await (const d of everyItem((req) => core.domains.list(id, undefined, req))) {
          io.out(`${d.name}\tdns_valid=${d.dns.valid}\t${d.id}\n`);
        }
      });
    });
  domains
    .command('check')
    .description('look the domain\'s records up now and print what was found')
    .argument('<domain>', 'domain name')
    .action(async (name: string) => {
      await withCore(program, async (core) => {
        const domain = await core.domains.byName(name);
        const checked = await core.dnsChecker.check(domain);
        if (!checked) throw badRequest('DNS could not be asked (no lookup was answered); check dns.servers');
        printRecords(io, core, checked);
      });
    });
  domains
    .command('rotate-dkim')
    .description('make the standby DKIM key the active one now (its TXT record must be published)')
    .argument('<domain>', 'domain name')
    .action(async (name: string) => {
      await withCore(program, async (core) => {
        const domain = await core.domains.byName(name);
        const { domain: after, decision } = await core.rotator.rotate(domain, true);
        const active = after.dkim.active.keys.map((k) => k.selector).join(', ');
        switch (decision.kind) {
          case 'rotate':
            io.out(`rotated: active selector now ${active}; the old key stays published until ${after.dkim.retired.at(-1)?.publishUntil}\n`);
            break;
          case 'no_standby':
          case 'standby_not_published': {
            const standby = core.dnsChecker.records(after).filter((r) => after.dkim.standby?.keys.some((k) => r.key === `dkim:${k.selector}`));
            io.err(`not rotated: publish the standby key first, then run this again:\n`);
            for (const r of standby) io.err(`  TXT ${r.host}\n      ${r.content}\n`);
            throw badRequest('standby DKIM key not published');
          }
          case 'not_enabled':
          case 'wait':
            throw badRequest(`not rotated (${decision.kind})`);
        }
      });
    });
  return domains;
}
