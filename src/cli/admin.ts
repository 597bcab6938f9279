import type { Command } from 'commander';
import type { AdminOperations } from '../control/admin-protocol.ts';
import { ControlClient, NoDaemonError } from '../control/client.ts';
import { controlSocketPath, type QueueOperations } from '../control/protocol.ts';
import type { Core } from '../assemblies/core.ts';
import { controlSocketFrom } from './control-socket.ts';

/** What the admin commands ask: the queue, and the accounts, keys and domains. */
export interface Operations {
  queue: QueueOperations;
  admin: AdminOperations;
}

/**
 * Runs one operation on the running daemon (over its control socket) or, when no daemon answers
 * there, on the store opened directly. Either way the same implementations (QueueAdmin,
 * CoreAdmin) do the work, so the answer, and what the command prints, are the same. `daemon`
 * says which way it went.
 */
export async function onDaemonOrStore<T>(program: Command, op: (ops: Operations) => Promise<T>): Promise<{ result: T; daemon: boolean }> {
  const client = new ControlClient(controlSocketFrom(program) ?? controlSocketPath(await validConfig(program)));
  try {
    return { result: await op({ queue: client, admin: client }), daemon: true };
  } catch (err) {
    if (!(err instanceof NoDaemonError)) throw err;
  }
  // No daemon: the store is opened with the configuration, validated.
  const config = await validConfig(program);
  // Imported only now: the store and the domain services are most of the daemon, and a command
  // answered by the daemon needs none of them.
  const { openCore } = await import('../assemblies/core.ts');
  const core = await openCore(config);
  try {
    return { result: await op(await localOperations(core)), daemon: false };
  } finally {
    await core.store.close();
  }
}

/** The configuration, validated: its schema is loaded only for commands that need it. */
async function validConfig(program: Command) {
  return (await import('./config-option.ts')).configFrom(program);
}

/** One admin operation, on the running daemon or on the store: its result. */
export async function onAdmin<T>(program: Command, op: (admin: AdminOperations) => Promise<T>): Promise<T> {
  return (await onDaemonOrStore(program, ({ admin }) => op(admin))).result;
}

/** The operations over a store this process opened: no daemon, so no job engine to ask or wake. */
async function localOperations(core: Core): Promise<Operations> {
  const [{ jobStore }, { QueueAdmin }, { CoreAdmin }, { Router, routerOptions }, { deliveryRouting }] = await Promise.all([
    import('../assemblies/core.ts'),
    import('../control/queue-admin.ts'),
    import('../control/core-admin.ts'),
    import('../delivery/router.ts'),
    import('../queue/destination-name.ts'),
  ]);
  return {
    queue: new QueueAdmin({
      messages: core.messages,
      repo: core.messagesRepo,
      events: core.events,
      clock: core.clock,
      jobs: jobStore(core),
      routing: deliveryRouting(core.config.delivery, new Router(core.resolver, routerOptions(core.config.delivery), core.clock)),
      daemon: null,
    }),
    admin: new CoreAdmin(core),
  };
}
