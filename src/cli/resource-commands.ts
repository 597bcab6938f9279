import { Command } from 'commander';
import type { AdminOperations } from '../control/admin-protocol.ts';
import type { ResourceInput } from '../control/resource-protocol.ts';
import { onAdmin } from './admin.ts';
import type { CliIo } from './io.ts';
import { fields, json } from './print.ts';

/** What a resource of the API with ids (SMTP credentials, webhooks, routes) gives its commands. */
export interface ResourceSpec<V extends { id: string }> {
  /** The command: `postilion <name> list|show|…`. */
  name: string;
  description: string;
  /** In help and messages: "webhook". */
  noun: string;
  list: (admin: AdminOperations, account: string) => Promise<V[]>;
  /** What `list` prints of one, tab-separated. */
  line: (item: V) => string[];
  show: (admin: AdminOperations, input: ResourceInput) => Promise<V>;
  /** Resources with an enabled state get `enable` and `disable`. */
  enable?: (admin: AdminOperations, input: ResourceInput & { enabled: boolean }) => Promise<V>;
  delete: (admin: AdminOperations, input: ResourceInput) => Promise<V>;
}

interface Options {
  account: string;
  json?: boolean;
}

/**
 * `postilion <resource> list|show|enable|disable|delete`: on the running daemon or on the store,
 * each with --json. Every one names its account (--account), as the API's paths do.
 */
export function resourceCommands<V extends { id: string }>(program: Command, io: CliIo, spec: ResourceSpec<V>): Command {
  const group = new Command(spec.name).description(spec.description);
  const run = <T>(op: (admin: AdminOperations) => Promise<T>) => onAdmin(program, op);
  const account = (command: Command) => command.requiredOption('--account <id>', 'account id').option('--json', 'print JSON');

  account(group.command('list').description(`list the ${spec.noun}s of an account`)).action(async (opts: Options) => {
    const items = await run((admin) => spec.list(admin, opts.account));
    io.out(opts.json ? json(items) : items.map((item) => `${spec.line(item).join('\t')}\n`).join(''));
  });
  const one = (verb: string, description: string, op: (admin: AdminOperations, input: ResourceInput) => Promise<V>, said?: (item: V) => string) =>
    account(group.command(verb).description(description).argument('<id>', `${spec.noun} id`)).action(async (id: string, opts: Options) => {
      const item = await run((admin) => op(admin, { account: opts.account, id }));
      io.out(opts.json ? json(item) : said ? said(item) : fields(item));
    });
  one('show', `show one ${spec.noun} (its secret was shown once, when it was made)`, spec.show);
  const enable = spec.enable;
  if (enable) {
    for (const enabled of [true, false]) {
      const verb = enabled ? 'enable' : 'disable';
      one(
        verb,
        `${verb} a ${spec.noun}`,
        (admin, input) => enable(admin, { ...input, enabled }),
        (item) => `${verb}d ${item.id}\n`,
      );
    }
  }
  one('delete', `delete a ${spec.noun}`, spec.delete, (item) => `deleted ${item.id}\n`);
  return group;
}
