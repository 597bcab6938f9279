import { Command } from 'commander';
import type { MessageTrace } from '../control/resource-protocol.ts';
import { onAdmin } from './admin.ts';
import type { CliIo } from './io.ts';
import { json } from './print.ts';

/** `postilion messages show <id>`: where a message is, and everything that happened to it. */
export function messageCommands(program: Command, io: CliIo): Command {
  const group = new Command('messages').description('where a message is: its state, and its events and delivery attempts in order');
  group
    .command('show')
    .description('one message (one recipient): its state, then every event and delivery attempt, oldest first')
    .argument('<id>', 'the message id the API returned: its Message-ID (<…@domain>) or the UUID in it')
    .option('--account <id>', 'the account, to look up a Message-ID the client set itself')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { account?: string; json?: boolean }) => {
      const trace = await onAdmin(program, (admin) => admin.showMessage({ id, account: opts.account }));
      io.out(opts.json ? json(trace) : formatTrace(trace));
    });
  return group;
}

export function formatTrace({ message: m, trace }: MessageTrace): string {
  const head = [
    `message ${m.id}  ${m.status}  account ${m.account_id}`,
    `from <${m.sender}> to <${m.recipient}>  subject ${JSON.stringify(m.subject)}`,
    `Message-ID ${m.message_id}  created ${m.created_at}  attempts ${m.num_attempts}${m.bounce_classification ? `  classification ${m.bounce_classification}` : ''}`,
  ];
  const width = Math.max(0, ...trace.map((t) => t.what.length));
  const lines = trace.map((t) => `${t.at}  ${t.kind.padEnd(7)}  ${t.what.padEnd(width)}  ${t.detail}`.trimEnd());
  return `${[...head, '', ...lines].join('\n')}\n`;
}
