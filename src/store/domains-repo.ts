import type { WriteOp } from './group-commit.ts';
import { readPage, type Page, type PageRequest } from './page.ts';
import type { DomainRecord } from './records.ts';
import type { Store } from './store.ts';

/**
 * Domains by id, with two indexes written in the same batch: name → id (names are unique across
 * accounts) and account → id, split by DNS validity so that the `dns_valid` filter reads only
 * matching entries.
 */
export class DomainsRepo {
  constructor(private readonly store: Store) {}

  get(id: string): Promise<DomainRecord | undefined> {
    return this.store.get<DomainRecord>('domains', id);
  }

  async getByName(name: string): Promise<DomainRecord | undefined> {
    const id = await this.store.get<string>('domainsByName', name);
    return id === undefined ? undefined : this.get(id);
  }

  /** How many domains an account has. */
  async countOfAccount(accountId: string): Promise<number> {
    const prefix = `${accountId}:`;
    return (await this.store.families.domainsByAccount.keys({ gt: prefix, lt: `${prefix}\xff` }).all()).length;
  }

  /** One page of an account's domains in creation order; `valid` filters on dns_valid. */
  async list(accountId: string, valid: boolean | undefined, page: PageRequest): Promise<Page<DomainRecord>> {
    if (valid === undefined) {
      // Both validity ranges in id order: read each page-sized slice and merge.
      const [a, b] = await Promise.all([this.list(accountId, true, page), this.list(accountId, false, page)]);
      return mergePages(a, b, page);
    }
    const ids = await readPage<string>(this.store.families.domainsByAccount, `${accountId}:${valid ? 1 : 0}:`, page);
    const items = await Promise.all(ids.items.map((id) => this.get(id)));
    return { ...ids, items: items.filter((d): d is DomainRecord => d !== undefined) };
  }

  /** Every domain (background jobs only: re-checks and rotation). */
  async *all(): AsyncGenerator<DomainRecord> {
    for await (const value of this.store.families.domains.values()) yield value as DomainRecord;
  }

  /** Puts the record and moves its account index entry if its validity changed. */
  put(domain: DomainRecord, previous?: DomainRecord): WriteOp[] {
    const ops: WriteOp[] = [];
    if (previous && previous.dns.valid !== domain.dns.valid) {
      ops.push({ type: 'del', family: 'domainsByAccount', key: accountKey(previous) });
    }
    ops.push(
      { type: 'put', family: 'domains', key: domain.id, value: domain },
      { type: 'put', family: 'domainsByName', key: domain.name, value: domain.id },
      { type: 'put', family: 'domainsByAccount', key: accountKey(domain), value: domain.id },
    );
    return ops;
  }

  delete(domain: DomainRecord): WriteOp[] {
    return [
      { type: 'del', family: 'domains', key: domain.id },
      { type: 'del', family: 'domainsByName', key: domain.name },
      { type: 'del', family: 'domainsByAccount', key: accountKey(domain) },
    ];
  }
}

function accountKey(domain: DomainRecord): string {
  return `${domain.accountId}:${domain.dns.valid ? 1 : 0}:${domain.id}`;
}

/** Merges two id-ordered pages of disjoint ranges into one page of the same request. */
function mergePages(a: Page<DomainRecord>, b: Page<DomainRecord>, req: PageRequest): Page<DomainRecord> {
  const rows = [...a.items.map((d, i) => ({ d, k: a.keys[i]! })), ...b.items.map((d, i) => ({ d, k: b.keys[i]! }))];
  rows.sort((x, y) => (x.k < y.k ? -1 : x.k > y.k ? 1 : 0));
  const backwards = req.before !== undefined;
  const chosen = backwards ? rows.slice(-req.limit) : rows.slice(0, req.limit);
  const dropped = rows.length > chosen.length;
  return {
    items: chosen.map((r) => r.d),
    keys: chosen.map((r) => r.k),
    hasNext: backwards ? a.hasNext || b.hasNext : dropped || a.hasNext || b.hasNext,
    hasPrevious: backwards ? dropped || a.hasPrevious || b.hasPrevious : a.hasPrevious || b.hasPrevious,
  };
}
