import type { Logger } from 'pino';
import type { DrainLine } from '../control/protocol.ts';
import type { Messages } from '../message/messages.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageRecord } from '../store/records.ts';
import { domainOf } from '../util/email.ts';
import { AppError, badRequest, conflict, notFound } from '../util/errors.ts';
import type { ClusterCommands } from './commands.ts';
import { attachBodies, HANDOVER_BYTES, HANDOVER_MESSAGES, type Handover, type HandoverAnswer } from './handover.ts';
import type { LiveNodes } from './live-nodes.ts';

/** Messages locked and offered at once (at most HANDOVER_MESSAGES). */
const BATCH = 50;
/** How long the other node has to take a handover, and in all to store it and answer. */
const TAKE_MS = 30_000;
const STORE_MS = 600_000;
/** How long a drain waits, by default, for messages the delivery engine holds to come out of it. */
export const DRAIN_WAIT_SECONDS = 60;
const NODE_ID = /^[A-Za-z0-9._-]{1,63}$/;

/**
 * `postilion queue drain --to <node>`: hands this node's queued mail (messages waiting for their
 * first or next attempt, or held for an account that is not active) to another live node, batch
 * by batch, each with its bodies (Messages.handOver). A message is deleted here only once the
 * other node has stored it, and one the delivery engine holds (ready or in flight) is left to
 * its attempt: the drain goes over the queue again until nothing is left, or only such
 * messages, for up to `waitSeconds`. Mail accepted meanwhile is handed over too: take the node
 * out of service first.
 */
export class QueueDrain {
  private stopping = false;

  constructor(
    private readonly o: {
      nodeId: string;
      messages: Messages;
      repo: MessagesRepo;
      commands: ClusterCommands;
      nodes: LiveNodes;
      log: Logger;
    },
  ) {}

  /** The node is stopping: a drain under way ends after its batch. */
  stop(): void {
    this.stopping = true;
  }

  /**
   * The drain, as lines for the operator: a first progress line once the other node is known to
   * be live (a refusal before it is the request's error), one per batch, and the result.
   */
  async *run(to: string, waitSeconds = DRAIN_WAIT_SECONDS): AsyncGenerator<DrainLine> {
    const from = this.o.nodeId;
    await this.checkTarget(to);
    if (!Number.isFinite(waitSeconds) || waitSeconds < 0 || waitSeconds > 3600) throw badRequest('wait_seconds must be between 0 and 3600');
    const log = this.o.log.child({ to_node: to });
    log.info('queue drain started');
    yield { progress: { from, to, moved: 0, batch: 0 } };
    const deadline = Date.now() + waitSeconds * 1000;
    let moved = 0;
    for (;;) {
      let movedInPass = 0;
      let busy = 0;
      for await (const ids of this.queuedIds()) {
        if (this.stopping) throw conflict(`this node is stopping: the drain ended after ${moved} messages; run it again once the node is back`);
        let answer: HandoverAnswer | null = null;
        const result = await this.o.messages.handOver(ids, async (queued) => {
          answer = await this.send(to, queued, moved);
          return new Set(answer.taken);
        });
        busy += result.busy;
        for (const m of result.moved) {
          log.info(
            { message_id: m.id, account_id: m.accountId, recipient_domain: domainOf(m.recipient), status: m.status },
            'message handed over to another node',
          );
        }
        moved += result.moved.length;
        movedInPass += result.moved.length;
        const failed = answer as HandoverAnswer | null;
        if (failed && failed.failed > 0) {
          throw conflict(`node ${to} could not store ${failed.failed} of the messages handed over (${failed.error}): they stay here; ${moved} moved so far`);
        }
        if (result.moved.length > 0) yield { progress: { from, to, moved, batch: result.moved.length } };
      }
      // Mail that came meanwhile, or did not fit in a batch: another pass.
      if (movedInPass > 0) continue;
      if (busy === 0 || Date.now() >= deadline || this.stopping) {
        log.info({ moved, in_delivery: busy }, 'queue drain done');
        yield { result: { from, to, moved, in_delivery: busy } };
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  private async checkTarget(to: string): Promise<void> {
    if (!NODE_ID.test(to)) throw badRequest(`"${to}" is not a node id (letters, digits, dot, dash and underscore; at most 63)`);
    if (to === this.o.nodeId) throw badRequest(`${to} is this node: drain to another node of the cluster`);
    let states: Awaited<ReturnType<LiveNodes['others']>>;
    try {
      states = await this.o.nodes.others();
    } catch (err) {
      throw Object.assign(new AppError(503, 'the cluster database cannot be reached: try again'), { cause: err });
    }
    if (states.down.includes(to)) throw conflict(`node ${to} is not reachable (stopped, or no heartbeat lately): drain to a live node`);
    if (!states.live.includes(to)) {
      throw notFound(`no node ${to} in this cluster${states.live.length > 0 ? ` (live nodes: ${states.live.join(', ')})` : ': no other node is live'}`);
    }
  }

  /** Ids of the queued messages: the due-time index, then the held list, in batches. */
  private async *queuedIds(): AsyncGenerator<string[]> {
    let ids: string[] = [];
    for await (const { id } of this.o.repo.scheduled()) {
      ids.push(id);
      if (ids.length === BATCH) {
        yield ids;
        ids = [];
      }
    }
    for await (const [, id] of this.o.repo.held()) {
      ids.push(id);
      if (ids.length === BATCH) {
        yield ids;
        ids = [];
      }
    }
    if (ids.length > 0) yield ids;
  }

  /**
   * Offers the queued messages (as many as HANDOVER_BYTES of bodies allow, at least one) to the
   * other node and waits for its answer: the ids it stored.
   */
  private async send(to: string, queued: MessageRecord[], movedBefore: number): Promise<HandoverAnswer> {
    const { repo } = this.o;
    const bodies = new Map<string, Buffer[]>();
    const messages: Handover['messages'] = [];
    let bytes = 0;
    for (const record of queued.slice(0, HANDOVER_MESSAGES)) {
      if (!bodies.has(record.bodyId)) {
        const chunks: Buffer[] = [];
        for await (const chunk of repo.body(record.bodyId)) chunks.push(chunk);
        const size = chunks.reduce((sum, c) => sum + c.length, 0);
        if (messages.length > 0 && bytes + size > HANDOVER_BYTES) break;
        bodies.set(record.bodyId, chunks);
        bytes += size;
      }
      messages.push({ record, links: record.tracking.click ? ((await repo.links(record.id)) ?? null) : null });
    }
    const handover: Handover = { messages, bodies: Object.fromEntries([...bodies].map(([id, chunks]) => [id, chunks.length])) };
    const [outcome] = await this.o.commands.ask([to], 'handover', handover, {
      waitMs: TAKE_MS,
      runningMs: STORE_MS,
      attach: (client, commandId) => attachBodies(client, commandId, bodies),
    });
    const left = `; ${movedBefore} moved before`;
    if (!outcome) throw new Error('no outcome for the handover asked');
    if (outcome.state === 'unanswered' && !outcome.taken) {
      throw conflict(`node ${to} did not take a handover within ${TAKE_MS / 1000} s: its messages stay here (${to} has none of them)${left}`);
    }
    if (outcome.state === 'unanswered') {
      throw conflict(
        `node ${to} took a handover of ${messages.length} messages but did not answer in time: they stay here, and ${to} may hold them too; ` +
          `run the drain to ${to} again once it answers (it keeps each message once)${left}`,
      );
    }
    if (!outcome.answer.ok) throw new AppError(outcome.answer.status, `node ${to} refused the handover: ${outcome.answer.message}${left}`);
    return outcome.answer.value as HandoverAnswer;
  }
}
