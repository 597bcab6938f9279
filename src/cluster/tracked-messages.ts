import type { MessagesRepo } from '../store/messages-repo.ts';
import type { MessageHitsRecord, MessageRecord } from '../store/records.ts';
import type { WriteOp } from '../store/types.ts';

/**
 * Cluster mode: what the tracking endpoint reads of a message (tracking/listener-thread.ts,
 * tracking/hits.ts). An open or click may reach any node: a message of this node is read here,
 * one of another node from what that node published (its record, which names it, and its
 * links). The hit is recorded on this node (its event, in this node's outbox), and its
 * publication adds it to the message's published counts and to the statistics, once.
 */
export class TrackedMessages implements Pick<MessagesRepo, 'get' | 'links' | 'hits' | 'putHits'> {
  constructor(
    private readonly local: MessagesRepo,
    /** MessagesRepo over the published view (cluster/published-view.ts). */
    private readonly published: MessagesRepo,
  ) {}

  async get(id: string): Promise<MessageRecord | undefined> {
    return (await this.local.get(id)) ?? (await this.published.get(id));
  }

  async links(id: string): Promise<string[] | undefined> {
    return (await this.local.links(id)) ?? (await this.published.links(id));
  }

  /** This node's counts of its own messages (another node's are not kept here: tracking/hits.ts). */
  hits(ids: string[]): Promise<Array<MessageHitsRecord | undefined>> {
    return this.local.hits(ids);
  }

  putHits(id: string, hits: MessageHitsRecord): WriteOp {
    return this.local.putHits(id, hits);
  }
}
