import { Command } from 'commander';
import type { QueueOperations, Selection } from '../control/protocol.ts';
import { ControlClient, NoDaemonError } from '../control/client.ts';
import { controlSocketPath } from '../control/protocol.ts';
import { badRequest, conflict } from '../util/errors.ts';
import { onDaemonOrStore } from './admin.ts';
import { controlSocketFrom } from './control-socket.ts';
import type { CliIo } from './io.ts';
import { formatDrainProgress, formatDrainResult, formatList, formatPurge, formatRetry, formatStatus, formatSuspend } from './queue-format.ts';

/** One queue operation on the running daemon or, when none answers, on the store opened directly. */
function onQueue<T>(program: Command, op: (queue: QueueOperations) => Promise<T>): Promise<{ result: T; daemon: boolean }> {
  return onDaemonOrStore(program, ({ queue }) => op(queue));
}

interface SelectionOptions {
  all?: boolean;
  domain?: string;
  account?: string;
  json?: boolean;
}

function selectionOf(ids: string[], opts: SelectionOptions): Selection {
  return { ids, domain: opts.domain, account: opts.account, all: opts.all };
}

function limitOf(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw badRequest(`--limit: "${value}" is not a whole number of at least 1`);
  return n;
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

export function queueCommands(program: Command, io: CliIo): Command {
  const queue = new Command('queue').description(
    'what is queued (mail and webhook deliveries), and why it waits; retry or purge mail; suspend or resume a destination',
  );
  queue
    .command('status')
    .description("queued messages by state and by destination (recipient domain), with the scheduler's live figures")
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const { result } = await onQueue(program, (q) => q.status());
      io.out(opts.json ? json(result) : formatStatus(result));
    });
  queue
    .command('list')
    .description("one line per queued message, in due order, with its last attempt's reply")
    .option('--domain <domain>', 'only messages to this recipient domain')
    .option('--account <id>', 'only messages of this account')
    .option('--status <state>', 'only messages in this state: due, deferred or scheduled')
    .option('--limit <n>', 'at most this many lines (default 100)', limitOf)
    .option('--json', 'print JSON')
    .action(async (opts: { domain?: string; account?: string; status?: string; limit?: number; json?: boolean }) => {
      const { result } = await onQueue(program, (q) => q.list({ domain: opts.domain, account: opts.account, state: opts.status, limit: opts.limit }));
      io.out(opts.json ? json(result) : formatList(result));
    });
  queue
    .command('retry')
    .description('make deferred messages due now (by id: scheduled ones too); the daemon tries them at once')
    .argument('[ids...]', 'message ids (UUIDs)')
    .option('--all', 'every deferred message')
    .option('--domain <domain>', 'every deferred message to this recipient domain')
    .option('--account <id>', 'every deferred message of this account')
    .option('--json', 'print JSON')
    .action(async (ids: string[], opts: SelectionOptions) => {
      const { result, daemon } = await onQueue(program, (q) => q.retry(selectionOf(ids, opts)));
      io.out(opts.json ? json(result) : formatRetry(result, daemon));
    });
  queue
    .command('purge')
    .description('take messages off the queue: they become Failed ("purged by operator") and are never sent')
    .argument('[ids...]', 'message ids (UUIDs)')
    .option('--all', 'every queued message (needs --yes)')
    .option('--domain <domain>', 'every queued message to this recipient domain (needs --yes)')
    .option('--account <id>', 'every queued message of this account (needs --yes)')
    .option('--yes', 'confirm a purge by --all, --domain or --account')
    .option('--json', 'print JSON')
    .action(async (ids: string[], opts: SelectionOptions & { yes?: boolean }) => {
      const bulk = opts.all === true || opts.domain !== undefined || opts.account !== undefined;
      if (bulk && !opts.yes) throw badRequest('purging by --all, --domain or --account fails every message it selects: add --yes to confirm');
      const { result } = await onQueue(program, (q) => q.purge(selectionOf(ids, opts)));
      io.out(opts.json ? json(result) : formatPurge(result));
    });
  for (const verb of ['suspend', 'resume'] as const) {
    queue
      .command(verb)
      .description(
        verb === 'suspend'
          ? "stop starting jobs for the destination a name stands for (a domain's MX set, or the transport or smarthost host that takes its mail; a URL origin), and print it; jobs wait, in flight ones finish; kept across restarts"
          : 'start jobs for a suspended destination again (named as status shows it, or as it was suspended)',
      )
      .argument(
        '<name>',
        'a recipient domain ("example.org"), an MX set or host as status shows it ("mx1.example.net,mx2.example.net"), or a URL origin ("https://hooks.example.com")',
      )
      .option('--json', 'print JSON')
      .action(async (destination: string, opts: { json?: boolean }) => {
        const { result, daemon } = await onQueue(program, (q) => q[verb](destination));
        io.out(opts.json ? json(result) : formatSuspend(result, daemon));
      });
  }
  queue
    .command('drain')
    .description(
      "cluster mode: hand this node's queued mail (with its bodies) to another live node, before maintenance; a message is deleted here once that node has stored it, those being delivered are left to their attempt",
    )
    .requiredOption('--to <node>', 'the node id to hand the mail to (a live node of the cluster)')
    .option('--wait <seconds>', 'how long to wait for messages being delivered to come out of delivery (default 60)', secondsOf)
    .option('--json', 'print JSON lines: each step, then the result')
    .action(async (opts: { to: string; wait?: number; json?: boolean }) => {
      // The configuration is validated (its schema loaded) only when data.dir alone does not say where the socket is.
      const client = new ControlClient(controlSocketFrom(program) ?? controlSocketPath((await import('./config-option.ts')).configFrom(program)));
      try {
        const result = await client.drain(opts.to, opts.wait, (step) =>
          io.out(opts.json ? `${JSON.stringify({ progress: step })}\n` : formatDrainProgress(step)),
        );
        io.out(opts.json ? `${JSON.stringify({ result })}\n` : formatDrainResult(result));
      } catch (err) {
        if (err instanceof NoDaemonError) throw conflict('no daemon runs: a drain hands over the queue of the running daemon (start it, in cluster mode)');
        throw err;
      }
    });
  return queue;
}

function secondsOf(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 3600) throw badRequest(`--wait: "${value}" is not a whole number of seconds from 0 to 3600`);
  return n;
}
