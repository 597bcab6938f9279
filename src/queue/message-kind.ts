import { isFinal } from '../message/retention.ts';
import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageRecord } from '../store/records.ts';
import { domainOf } from '../util/email.ts';
import type { DeliveryQueue } from './delivery-queue.ts';
import type { JobKind } from './engine.ts';
import { laneOf } from './lane.ts';

/** How long the engine waits for an MX set before it files the message under its domain. */
const DESTINATION_WAIT_MS = 2000;

/**
 * Outbound mail as a job kind: the SMTP dispatcher, destinations by MX set, and
 * DeliveryQueue's attempt and outcome rules.
 */
export function messageKind(
  repo: Pick<MessagesRepo, 'get' | 'getManyCached'>,
  queue: Pick<DeliveryQueue, 'process'>,
  mxSet: (domain: string) => Promise<string>,
  /** With delivery sources configured: the source of the message's next attempt; its lane is `<source>/<destination>` (queue/lane.ts). */
  source?: (message: MessageRecord) => Promise<string>,
): JobKind<MessageRecord> {
  // The messages of a domain taken together (a fill takes hundreds) share one look-up and one
  // timer: a timer per message cost more than the look-up, which is cached.
  const looking = new Map<string, Promise<string>>();
  const destinationOf = (message: MessageRecord): Promise<string> => {
    const domain = domainOf(message.recipient);
    // Sandbox mail is never sent: no need to ask DNS where it would go.
    if (message.sandbox) return Promise.resolve(domain);
    const pending = looking.get(domain);
    if (pending) return pending;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(domain), DESTINATION_WAIT_MS);
    });
    const found = Promise.race([mxSet(domain).catch(() => domain), late]).finally(() => {
      clearTimeout(timer);
      looking.delete(domain);
    });
    looking.set(domain, found);
    return found;
  };
  return {
    name: 'message',
    dispatcher: 'smtp',
    async load(id) {
      const message = await repo.get(id);
      return !message || isFinal(message.status) ? null : message;
    },
    async loadMany(ids) {
      return (await repo.getManyCached(ids)).map((message) => (!message || isFinal(message.status) ? null : message));
    },
    dueMs: (message) => Date.parse(message.dueAt),
    destination(message) {
      if (!source || message.sandbox) return destinationOf(message);
      return Promise.all([source(message), destinationOf(message)]).then(([from, destination]) => laneOf(from, destination));
    },
    run: (message, release, destination) => queue.process(message, release, destination),
  };
}
