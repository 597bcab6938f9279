import { Grants } from '../accounts/scopes.ts';
import { cancelMessage } from '../api/routes/messages/cancel.ts';
import { ClusterCommands } from '../cluster/commands.ts';
import { QueueDrain } from '../cluster/drain.ts';
import { handoverHandler } from '../cluster/handover.ts';
import { LiveNodesOf } from '../cluster/live-nodes.ts';
import { cancelHandler, RemoteMessages, type MessagesElsewhere } from '../cluster/remote-messages.ts';
import type { Classification } from '../bounce/rules.ts';
import { AppError } from '../util/errors.ts';
import type { JobsAssembly } from './jobs.ts';
import type { Assembly, Context, Readiness } from './lifecycle.ts';

/**
 * Cluster mode's commands between nodes (nothing without `cluster`): those other nodes send this
 * one (cancel a message it holds, take over a draining node's mail) and those it sends them (the
 * API's cancel of a message held elsewhere, `postilion queue drain`), to the nodes whose
 * heartbeat (the cluster assembly's) says they can answer. After the cluster in the daemon's
 * list: it answers commands once this node is registered, until the store closes.
 */
export class CommandsAssembly implements Assembly {
  readonly name = 'commands';
  /** Its settings are the cluster section's, which the core owns (it opens the database). */
  readonly sections = [];
  /** The API's way to messages other nodes hold (null: one node). */
  readonly elsewhere: MessagesElsewhere | null = null;
  /** `postilion queue drain` (null: one node). */
  readonly queueDrain: QueueDrain | null = null;
  private readonly commands: ClusterCommands | null = null;
  private started = false;

  /** Hands a bounce for a message another node holds to that node (null: one node). */
  readonly bounceElsewhere: ((node: string, bounce: LateBounce) => Promise<void>) | null = null;

  constructor(ctx: Context, jobs: JobsAssembly, lateBounce: (bounce: LateBounce) => Promise<unknown>) {
    const { core, log } = ctx;
    const cluster = core.cluster;
    if (!cluster) return;
    const nodes = new LiveNodesOf(cluster.pool, cluster.nodeId);
    const commands = new ClusterCommands({
      pool: cluster.pool,
      connection: cluster.connection,
      nodeId: cluster.nodeId,
      log,
      handlers: {
        cancel: cancelHandler((request) => cancelMessage(core.messages, request.accountId, request.ref, new Grants(request.scopes)), log),
        handover: handoverHandler({ messages: core.messages, pool: cluster.pool, due: (dueMs) => jobs.engine.notify(dueMs), log }),
        // A bounce that reached another node's inbound MX: applied here as if it had come here.
        'late-bounce': async (payload) => {
          const bounce = lateBounceOf(payload);
          await lateBounce(bounce);
          return { id: bounce.id };
        },
      },
    });
    this.commands = commands;
    this.bounceElsewhere = (node, bounce) => commands.tell(node, 'late-bounce', bounce);
    this.elsewhere = new RemoteMessages(commands, nodes);
    this.queueDrain = new QueueDrain({ nodeId: cluster.nodeId, messages: core.messages, repo: core.messagesRepo, commands, nodes, log });
  }

  async start(): Promise<void> {
    if (!this.commands) return;
    await this.commands.start();
    this.started = true;
  }

  ready(): Readiness[] {
    return this.commands ? [{ name: 'cluster commands', ok: this.started }] : [];
  }

  async stopListening(): Promise<void> {
    this.queueDrain?.stop();
    this.commands?.stopTaking();
  }

  async drain(graceMs: number): Promise<void> {
    await this.commands?.settled(graceMs);
  }

  async close(): Promise<void> {
    this.started = false;
    await this.commands?.close();
  }
}

/** A bounce of a message, as the inbound MX read it (inbound/reports.ts), for the node that holds the message. */
export interface LateBounce {
  id: string;
  classification: Classification;
  text: string;
}

function lateBounceOf(payload: unknown): LateBounce {
  const p = payload as Partial<LateBounce> | null;
  if (!p || typeof p.id !== 'string' || typeof p.classification !== 'string' || typeof p.text !== 'string' || p.text.length > 2000) {
    throw new AppError(400, 'a late-bounce command needs id, classification and text');
  }
  return { id: p.id, classification: p.classification, text: p.text };
}
