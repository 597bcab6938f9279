import { Command } from 'commander';
import type { DomainView, RecordView } from '../control/admin-protocol.ts';
import { badRequest } from '../util/errors.ts';
import { onAdmin } from './admin.ts';
import type { CliIo } from './io.ts';

function wholeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n)) throw badRequest(`--rotation-days: "${value}" is not a whole number`);
  return n;
}

/** Exit status of `domains check` when a required record is missing: the check failed (2 is bad input, or DNS not asked). */
export const RECORD_MISSING = 1;

/**
 * What `domains check` says when a required record is not published, or null when all are: a
 * domain verified by hand sends all the same, so that is said on the same line, but the records
 * are still missing (receivers check them, not the mark).
 */
export function missingRecords(domain: DomainView): string | null {
  const missing = domain.records.filter((r) => r.required && !r.published);
  if (missing.length === 0) return null;
  const names = missing.map((r) => `${r.type} ${r.host}`).join(', ');
  const records = missing.length === 1 ? `DNS record ${names} missing` : `DNS records ${names} missing`;
  return `${domain.name}: ${domain.by_hand ? `verified by hand; ${records}` : `required ${records}`}`;
}

/** The records as a table an operator can copy into a zone. */
function printRecords(io: CliIo, domain: DomainView): void {
  io.out(`${domain.name}  dns_valid=${domain.dns_valid}${domain.by_hand ? ' (verified by hand)' : ''}  last check: ${domain.dns_checked_at ?? 'never'}\n`);
  for (const r of domain.records) {
    const state = r.published ? 'ok     ' : 'missing';
    io.out(`  [${state}] ${r.required ? 'required' : 'optional'}  ${r.type.padEnd(5)} ${r.host}\n            ${r.content}\n            (${r.label})\n`);
  }
}

function printStandby(io: CliIo, records: RecordView[]): void {
  io.err(`not rotated: publish the standby key first, then run this again:\n`);
  for (const r of records) io.err(`  TXT ${r.host}\n      ${r.content}\n`);
}

/** `postilion domains …`: on the running daemon, or on the store when it is stopped. */
export function domainCommands(program: Command, io: CliIo, setExit: (code: number) => void): Command {
  const domains = new Command('domains').description('manage sending domains');
  domains
    .command('add')
    .description('add a domain to an account and print the DNS records to publish')
    .argument('<domain>', 'domain name')
    .requiredOption('--account <id>', 'account id')
    .option('--rotation-days <n>', 'rotate the DKIM key every n days (default: no automatic rotation)', wholeNumber)
    .option('--selector <selector>', 'DKIM selector of the first key (default: a generated one)')
    .action(async (name: string, opts: { account: string; rotationDays?: number; selector?: string }) => {
      const domain = await onAdmin(program, (admin) =>
        admin.addDomain({ account: opts.account, name, rotation_days: opts.rotationDays, selector: opts.selector }),
      );
      printRecords(io, domain);
    });
  domains
    .command('list')
    .description('list the domains of an account')
    .requiredOption('--account <id>', 'account id')
    .action(async (opts: { account: string }) => {
      const { domains: list } = await onAdmin(program, (admin) => admin.listDomains({ account: opts.account }));
      for (const d of list) io.out(`${d.name}\tdns_valid=${d.dns_valid}${d.by_hand ? ' (verified by hand)' : ''}\t${d.id}\n`);
    });
  domains
    .command('check')
    .description(
      `look the domain's records up now and print what was found; exit ${RECORD_MISSING} when a required record is missing (also for a domain verified by hand)`,
    )
    .argument('<domain>', 'domain name')
    .action(async (name: string) => {
      const domain = await onAdmin(program, (admin) => admin.checkDomain({ name }));
      printRecords(io, domain);
      const missing = missingRecords(domain);
      if (missing === null) return;
      io.err(`postilion: ${missing}\n`);
      setExit(RECORD_MISSING);
    });
  domains
    .command('verify')
    .description(
      "mark the domain's DNS as verified by hand, for a set-up whose DNS cannot be looked up (a laptop): it may send at once. Logged, and shown in the domain; --clear takes the mark away",
    )
    .argument('<domain>', 'domain name')
    .option('--clear', 'take the mark away: the domain is invalid until its records are found', false)
    .action(async (name: string, opts: { clear: boolean }) => {
      const domain = await onAdmin(program, (admin) => admin.verifyDomain({ name, clear: opts.clear }));
      io.out(
        domain.verified_by_hand
          ? `${domain.name}: DNS marked as verified by hand (${domain.verified_by_hand.at}); it may send now. Publish its records before sending to the Internet.\n`
          : `${domain.name}: the verified-by-hand mark is cleared; dns_valid=${domain.dns_valid} until its records are found (postilion domains check ${domain.name})\n`,
      );
    });
  domains
    .command('rotate-dkim')
    .description('make the standby DKIM key the active one now (its TXT record must be published)')
    .argument('<domain>', 'domain name')
    .action(async (name: string) => {
      const rotation = await onAdmin(program, (admin) => admin.rotateDkim({ name }));
      switch (rotation.outcome) {
        case 'rotated':
          io.out(
            `rotated: active selector now ${rotation.active_selectors.join(', ')}; the old key stays published until ${rotation.previous_published_until}\n`,
          );
          return;
        case 'no_standby':
        case 'standby_not_published':
          printStandby(io, rotation.standby_records);
          throw badRequest('standby DKIM key not published');
        case 'not_enabled':
        case 'wait':
          throw badRequest(`not rotated (${rotation.outcome})`);
      }
    });
  return domains;
}
