import type { WriteOp } from './group-commit.ts';
import { readPage, type Page, type PageRequest } from './page.ts';
import type { SmtpCredentialRecord } from './records.ts';
import type { Store } from './store.ts';
import type { FamilyApi } from './pg/family.ts';

/**
 * SMTP credentials by id, with three indexes written in the same batch: account → id (an
 * account's credentials in creation order), username → id (usernames are unique server-wide),
 * and account + domain id → id, so that a domain-scoped listing reads only its domains' entries.
 */
export class SmtpCredentialsRepo {
  constructor(private readonly store: Store) {}

  get(id: string): Promise<SmtpCredentialRecord | undefined> {
    return this.store.get<SmtpCredentialRecord>('smtpCredentials', id);
  }

  async getByUsername(username: string): Promise<SmtpCredentialRecord | undefined> {
    const id = await this.store.get<string>('smtpCredentialsByUsername', username);
    return id === undefined ? undefined : this.get(id);
  }

  /** One page of the account's credentials in creation order; cursor keys are credential ids. */
  async list(accountId: string, page: PageRequest): Promise<Page<SmtpCredentialRecord>> {
    const ids = await readPage<string>(this.store.families.smtpCredentialsByAccount, `${accountId}:`, page);
    return { ...ids, items: await this.records(ids.items) };
  }

  /**
   * One page of the account's credentials associated with at least one of `domainIds`, in
   * creation order, each once. The per-domain index ranges are walked together in id order.
   */
  async listForDomains(accountId: string, domainIds: string[], req: PageRequest): Promise<Page<SmtpCredentialRecord>> {
    const prefixes = [...new Set(domainIds)].map((id) => `${accountId}:${id}:`);
    const index = this.store.families.smtpCredentialsByDomain;
    const first = (range: Range) => take(walk(index, prefixes, range), 1);
    let ids: string[];
    let hasNext: boolean;
    let hasPrevious: boolean;
    if (req.before !== undefined) {
      const rows = await take(walk(index, prefixes, { above: '', below: req.before, reverse: true }), req.limit + 1);
      hasPrevious = rows.length > req.limit;
      ids = rows.slice(0, req.limit).reverse();
      const last = ids.at(-1);
      // Nothing before the cursor: whatever the ranges hold comes after it.
      hasNext = (await first({ above: last ?? '', below: '\xff', reverse: false })).length > 0;
    } else {
      const rows = await take(walk(index, prefixes, { above: req.after ?? '', below: '\xff', reverse: false }), req.limit + 1);
      hasNext = rows.length > req.limit;
      ids = rows.slice(0, req.limit);
      const head = ids[0];
      hasPrevious = (await first({ above: '', below: head ?? '\xff', reverse: true })).length > 0;
    }
    const items = await this.records(ids);
    return { items, keys: items.map((r) => r.id), hasNext, hasPrevious };
  }

  /** The record and its indexes; none of the indexed fields changes after creation. */
  create(credential: SmtpCredentialRecord): WriteOp[] {
    return [
      { type: 'put', family: 'smtpCredentials', key: credential.id, value: credential },
      { type: 'put', family: 'smtpCredentialsByAccount', key: accountKey(credential), value: credential.id },
      { type: 'put', family: 'smtpCredentialsByUsername', key: credential.username, value: credential.id },
      ...credential.domains.map((d): WriteOp => ({ type: 'put', family: 'smtpCredentialsByDomain', key: domainKey(credential, d.id), value: credential.id })),
    ];
  }

  delete(credential: SmtpCredentialRecord): WriteOp[] {
    return [
      { type: 'del', family: 'smtpCredentials', key: credential.id },
      { type: 'del', family: 'smtpCredentialsByAccount', key: accountKey(credential) },
      { type: 'del', family: 'smtpCredentialsByUsername', key: credential.username },
      ...credential.domains.map((d): WriteOp => ({ type: 'del', family: 'smtpCredentialsByDomain', key: domainKey(credential, d.id) })),
    ];
  }

  /** The records of `ids`, in that order; an id deleted since its index entry was read is skipped. */
  private async records(ids: string[]): Promise<SmtpCredentialRecord[]> {
    const found = await Promise.all(ids.map((id) => this.get(id)));
    return found.filter((r): r is SmtpCredentialRecord => r !== undefined);
  }
}

function accountKey(credential: SmtpCredentialRecord): string {
  return `${credential.accountId}:${credential.id}`;
}

function domainKey(credential: SmtpCredentialRecord, domainId: string): string {
  return `${credential.accountId}:${domainId}:${credential.id}`;
}

/** Ids strictly between `above` and `below`, ascending or (`reverse`) descending. */
interface Range {
  above: string;
  below: string;
  reverse: boolean;
}

async function take(ids: AsyncGenerator<string>, count: number): Promise<string[]> {
  const out: string[] = [];
  if (count <= 0) return out;
  for await (const id of ids) {
    out.push(id);
    if (out.length === count) break;
  }
  return out;
}

/** The ids of several `prefix + id` ranges merged in order, each id once. */
async function* walk(index: FamilyApi, prefixes: string[], range: Range): AsyncGenerator<string> {
  const iterators = prefixes.map((p) => index.iterator({ gt: p + range.above, lt: p + range.below, reverse: range.reverse }));
  try {
    const next = async (i: number) => (await iterators[i]!.next())?.[1] as string | undefined;
    const heads = await Promise.all(iterators.map((_, i) => next(i)));
    const before = (a: string, b: string) => (range.reverse ? a > b : a < b);
    let last: string | undefined;
    for (;;) {
      let pick = -1;
      for (let i = 0; i < heads.length; i++) {
        const id = heads[i];
        if (id !== undefined && (pick === -1 || before(id, heads[pick]!))) pick = i;
      }
      if (pick === -1) return;
      const id = heads[pick]!;
      heads[pick] = await next(pick);
      // A credential of several of the domains sits in several ranges: yield it once.
      if (id === last) continue;
      last = id;
      yield id;
    }
  } finally {
    await Promise.all(iterators.map((it) => it.close()));
  }
}
