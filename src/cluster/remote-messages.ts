import type { Logger } from 'pino';
import type { MessageRecord } from '../store/records.ts';
import { AppError, conflict, notFound } from '../util/errors.ts';
import type { ClusterCommands, CommandHandler } from './commands.ts';
import type { LiveNodes } from './live-nodes.ts';

/** How long a node asking for a cancel waits for the owner to take it, and in all for its answer. */
export const CANCEL_WAIT_MS = 5000;
/** A node that took the cancel in time has this much longer to answer. */
const RUNNING_GRACE_MS = 2000;

/** A cancel as the API took it: whose, which message, and the caller's scopes (the owner checks them as the API does). */
export interface CancelRequest {
  accountId: string;
  /** The message's UUID or Message-ID, as given. */
  ref: string;
  scopes: string[];
}

/** What the owner answers: the cancelled message, or that it does not hold it. */
type CancelAnswer = { record: MessageRecord } | { notMine: true };

/** Messages this node does not hold, which another node of the cluster may: the API's way to them. */
export interface MessagesElsewhere {
  /** The owner's cancel, as the API answers it: the record cancelled, or its refusal (404, 403, 409 …). */
  cancel(request: CancelRequest): Promise<MessageRecord>;
}

/**
 * Cancels sent to the node that holds the message, through the commands table. Until the
 * cluster publishes who holds what, every live node is asked and the one holding the message
 * answers (the others: not mine). A node that is down, or does not answer in time, may hold
 * it: then 409, never a silent success.
 */
export class RemoteMessages implements MessagesElsewhere {
  constructor(
    private readonly commands: ClusterCommands,
    private readonly nodes: LiveNodes,
    private readonly waitMs = CANCEL_WAIT_MS,
  ) {}

  async cancel(request: CancelRequest): Promise<MessageRecord> {
    let states: Awaited<ReturnType<LiveNodes['others']>>;
    try {
      states = await this.nodes.others();
    } catch (err) {
      throw Object.assign(new AppError(503, 'the cluster database cannot be reached: try again'), { cause: err });
    }
    const outcomes = await this.commands.ask(states.live, 'cancel', request, {
      waitMs: this.waitMs,
      runningMs: this.waitMs + RUNNING_GRACE_MS,
    });
    for (const outcome of outcomes) {
      if (outcome.state !== 'done') continue;
      const { answer } = outcome;
      if (!answer.ok) throw new AppError(answer.status, answer.message);
      const value = answer.value as CancelAnswer;
      if ('record' in value) return value.record;
    }
    const late = outcomes.find((o) => o.state === 'unanswered' && o.taken);
    if (late) {
      throw conflict(
        `node ${late.node} took the cancel of message ${request.ref} but did not answer in time: read the message to know whether it is cancelled`,
      );
    }
    const unreachable = [...states.down, ...outcomes.filter((o) => o.state === 'unanswered').map((o) => o.node)].sort();
    if (unreachable.length === 0) throw notFound('message not found');
    const held =
      unreachable.length === 1
        ? `node ${unreachable[0]}, which is not reachable: it was not cancelled; try again once that node is back`
        : `one of the nodes ${unreachable.join(', ')}, which are not reachable: it was not cancelled; try again once they are back`;
    throw conflict(`message ${request.ref} is not on this node and may be held by ${held}`);
  }
}

/** The owner's side: applies the cancel with `cancel` (the API's own); a message it does not hold is not its to answer. */
export function cancelHandler(cancel: (request: CancelRequest) => Promise<MessageRecord>, log: Logger): CommandHandler {
  return async (payload, command): Promise<CancelAnswer> => {
    const request = cancelRequest(payload);
    try {
      const record = await cancel(request);
      log.info({ message_id: record.id, account_id: record.accountId, from_node: command.from }, 'message cancelled at the request of another node');
      return { record };
    } catch (err) {
      if (err instanceof AppError && err.status === 404) return { notMine: true };
      throw err;
    }
  };
}

/** The payload as another node of this cluster wrote it, checked before use. */
function cancelRequest(payload: unknown): CancelRequest {
  const p = payload as Partial<CancelRequest> | null;
  const text = (v: unknown, max: number) => typeof v === 'string' && v.length <= max;
  if (
    typeof p !== 'object' ||
    p === null ||
    !text(p.accountId, 64) ||
    !text(p.ref, 1000) ||
    !Array.isArray(p.scopes) ||
    p.scopes.length > 1000 ||
    !p.scopes.every((s) => text(s, 300))
  ) {
    throw new AppError(400, 'a cancel command of another node is not well formed');
  }
  return { accountId: p.accountId!, ref: p.ref!, scopes: p.scopes };
}
