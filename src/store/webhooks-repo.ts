import type { WriteOp } from './group-commit.ts';
import type { WebhookRecord } from './records.ts';
import type { Store } from './store.ts';

/**
 * Webhooks by id, and account → id (an account's webhooks in creation order, ids being
 * UUIDv7). An account has a bounded number of webhooks (Webhooks.MAX_PER_ACCOUNT), so its
 * listing, filters and the fan-out read the account's range whole.
 */
export class WebhooksRepo {
  constructor(private readonly store: Store) {}

  get(id: string): Promise<WebhookRecord | undefined> {
    return this.store.get<WebhookRecord>('webhooks', id);
  }

  /** The ids of the account's webhooks, in creation order. */
  async idsOfAccount(accountId: string): Promise<string[]> {
    const prefix = `${accountId}:`;
    return (await this.store.families.webhooksByAccount.values({ gt: prefix, lt: `${prefix}\xff` }).all()) as string[];
  }

  /** Every webhook of the account, in creation order. */
  async ofAccount(accountId: string): Promise<WebhookRecord[]> {
    const ids = await this.idsOfAccount(accountId);
    const found = await Promise.all(ids.map((id) => this.get(id)));
    return found.filter((r): r is WebhookRecord => r !== undefined);
  }

  async countOfAccount(accountId: string): Promise<number> {
    const prefix = `${accountId}:`;
    return (await this.store.families.webhooksByAccount.keys({ gt: prefix, lt: `${prefix}\xff` }).all()).length;
  }

  create(webhook: WebhookRecord): WriteOp[] {
    return [
      { type: 'put', family: 'webhooks', key: webhook.id, value: webhook },
      { type: 'put', family: 'webhooksByAccount', key: accountKey(webhook), value: webhook.id },
    ];
  }

  /** The account and id never change: only the record is rewritten. */
  update(webhook: WebhookRecord): WriteOp[] {
    return [{ type: 'put', family: 'webhooks', key: webhook.id, value: webhook }];
  }

  delete(webhook: WebhookRecord): WriteOp[] {
    return [
      { type: 'del', family: 'webhooks', key: webhook.id },
      { type: 'del', family: 'webhooksByAccount', key: accountKey(webhook) },
    ];
  }
}

function accountKey(webhook: WebhookRecord): string {
  return `${webhook.accountId}:${webhook.id}`;
}
