import type { WriteOp } from './group-commit.ts';
import type { RouteRecord } from './records.ts';
import type { Store } from './store.ts';

/**
 * Routes by id; `routesByAccount` holds `a:<account>:<id>` (an account's routes in creation
 * order) and `d:<account>:<domain>:<id>` (those at one domain: what the inbound MX asks for
 * each recipient). An account has a bounded number of routes (Routes.MAX_PER_ACCOUNT).
 */
export class RoutesRepo {
  constructor(private readonly store: Store) {}

  get(id: string): Promise<RouteRecord | undefined> {
    return this.store.get<RouteRecord>('routes', id);
  }

  async ofAccount(accountId: string): Promise<RouteRecord[]> {
    return this.read(`a:${accountId}:`);
  }

  async atDomain(accountId: string, domain: string): Promise<RouteRecord[]> {
    return this.read(`d:${accountId}:${domain}:`);
  }

  async countOfAccount(accountId: string): Promise<number> {
    const prefix = `a:${accountId}:`;
    return (await this.store.families.routesByAccount.keys({ gt: prefix, lt: `${prefix}\xff` }).all()).length;
  }

  create(route: RouteRecord): WriteOp[] {
    return [{ type: 'put', family: 'routes', key: route.id, value: route }, ...this.index(route, 'put')];
  }

  update(previous: RouteRecord, next: RouteRecord): WriteOp[] {
    return [...this.index(previous, 'del'), { type: 'put', family: 'routes', key: next.id, value: next }, ...this.index(next, 'put')];
  }

  delete(route: RouteRecord): WriteOp[] {
    return [{ type: 'del', family: 'routes', key: route.id }, ...this.index(route, 'del')];
  }

  private index(route: RouteRecord, type: 'put' | 'del'): WriteOp[] {
    const keys = [`a:${route.accountId}:${route.id}`, `d:${route.accountId}:${route.domain.name}:${route.id}`];
    return keys.map((key): WriteOp => (type === 'put' ? { type, family: 'routesByAccount', key, value: route.id } : { type, family: 'routesByAccount', key }));
  }

  private async read(prefix: string): Promise<RouteRecord[]> {
    const ids = (await this.store.families.routesByAccount.values({ gt: prefix, lt: `${prefix}\xff` }).all()) as string[];
    const found = await Promise.all(ids.map((id) => this.get(id)));
    return found.filter((r): r is RouteRecord => r !== undefined);
  }
}
