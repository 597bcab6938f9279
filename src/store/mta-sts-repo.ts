import type { Store } from './store.ts';

/** An MTA-STS policy as fetched for a recipient domain (RFC 8461 §5.1: cached for its max_age). */
export interface MtaStsRecord {
  version: 1;
  domain: string;
  /** The `id` of the `_mta-sts` TXT record when the policy was fetched. */
  id: string;
  /** The policy file as served. */
  text: string;
  fetchedAt: string;
  /** fetchedAt + max_age. */
  expiresAt: string;
}

/**
 * The `mtaStsPolicies` family: the policies delivery has fetched, so that a restart keeps
 * enforcing them (RFC 8461 §5.1) without fetching them again. Local to each node: a policy is
 * public and each node fetches its own. Written only when a policy is fetched, never per message.
 */
export class MtaStsRepo {
  constructor(private readonly store: Store) {}

  /** Read: the stored policy of the domain (lower-case), if any. */
  get(domain: string): Promise<MtaStsRecord | undefined> {
    return this.store.get<MtaStsRecord>('mtaStsPolicies', domain);
  }

  /** Writes: the domain's policy, replacing the one before. */
  put(record: MtaStsRecord): Promise<void> {
    return this.store.commit([{ type: 'put', family: 'mtaStsPolicies', key: record.domain, value: record }]);
  }

  /** Writes: forgets the domain's policy (it expired and none replaces it). */
  delete(domain: string): Promise<void> {
    return this.store.commit([{ type: 'del', family: 'mtaStsPolicies', key: domain }]);
  }
}
