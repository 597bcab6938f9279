import type { DomainFilter, MessageReads, Messages } from '../message/messages.ts';
import type { MessageFilter, MessagesRepo } from '../store/messages-repo.ts';
import type { Page, PageRequest } from '../store/page.ts';
import type { MessageRecord } from '../store/records.ts';
import { AppError } from '../util/errors.ts';

/**
 * Cluster mode: the message read API over what every node published (cluster/publisher.ts), so
 * that each node answers the same. A read first waits for this node's own events to be published
 * (`caughtUp`, bounded): a message accepted here is listed here at once, as on a single node. A
 * message's content stays on the node that accepted it: this node gives the content of its own
 * messages, and for another node's leaves it out (as the contract leaves out content that is not
 * available), naming that node (`contentNode`).
 */
export class PublishedMessages implements MessageReads {
  constructor(
    /** Messages over the published view (cluster/published-view.ts). */
    private readonly published: Messages,
    /** This node's messages and their records. */
    private readonly local: { messages: Messages; repo: MessagesRepo },
    private readonly nodeId: string,
    private readonly caughtUp: () => Promise<void>,
  ) {}

  async list(accountId: string, filter: MessageFilter, page: PageRequest): Promise<Page<MessageRecord>> {
    await this.caughtUp();
    return this.published.list(accountId, filter, page);
  }

  /** The published record; this node's own when its publication is late (the database was out of reach). */
  async get(accountId: string, ref: string, visible: DomainFilter): Promise<MessageRecord> {
    await this.caughtUp();
    try {
      return await this.published.get(accountId, ref, visible);
    } catch (err) {
      if (!(err instanceof AppError) || err.status !== 404) throw err;
      return this.local.messages.get(accountId, ref, visible);
    }
  }

  /** With the opens and clicks of every node (the published counts). */
  shown(messages: MessageRecord[]): Promise<MessageRecord[]> {
    return this.published.shown(messages);
  }

  async content(message: MessageRecord): Promise<Buffer | null> {
    if (this.contentNode(message) !== null) return null;
    // The published copy has no header block: the content is read from this node's record.
    const own = await this.local.repo.get(message.id);
    return own ? this.local.messages.content(own) : null;
  }

  contentNode(message: MessageRecord): string | null {
    return message.node !== undefined && message.node !== this.nodeId ? message.node : null;
  }
}
