import type { Command } from 'commander';
import type { AdminOperations } from '../control/admin-protocol.ts';
import { ControlClient, NoDaemonError } from '../control/client.ts';
import { CoreAdmin } from '../control/core-admin.ts';
import { controlSocketPath, type QueueOperations } from '../control/protocol.ts';
import { QueueAdmin } from '../control/queue-admin.ts';
import { jobStore, openCore, type Core } from '../daemon.ts';
import { Router, routerOptions } from '../delivery/router.ts';
import { deliveryRouting } from '../queue/destination-name.ts';
import { configFrom } from './main.ts';

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
  const config = configFrom(program);
  const client = new ControlClient(controlSocketPath(config));
  try {
    return { result: await op({ queue: client, admin: client }), daemon: true };
  } catch (err) {
    if (!(err instanceof NoDaemonError)) throw err;
  }
  const core = await openCore(config);
  try {
    return { result: await op(localOperations(core)), daemon: false };
  } finally {
    await core.store.close();
  }
}

/** One admin operation, on the running daemon or on the store: its result. */
export async function onAdmin<T>(program: Command, op: (admin: AdminOperations) => Promise<T>): Promise<T> {
  return (await onDaemonOrStore(program, ({ admin }) => op(admin))).result;
}

/** The operations over a store this process opened: no daemon, so no scheduler to ask or wake. */
function localOperations(core: Core): Operations {
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
