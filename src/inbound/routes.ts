import { checkTargetUrl, TargetRefusedError, type HostResolver } from '../delivery/http-target.ts';
import { newSecret, ROUTE_SECRET_PREFIX } from '../delivery/signing.ts';
import type { TargetCounters, TargetCounts } from '../queue/target-counters.ts';
import type { DomainsRepo } from '../store/domains-repo.ts';
import { pageOfItems, type Page, type PageRequest } from '../store/page.ts';
import type { RouteRecord } from '../store/records.ts';
import type { RoutesRepo } from '../store/routes-repo.ts';
import type { Store } from '../store/store.ts';
import type { Cidr } from '../util/cidr.ts';
import { normalizeDomain } from '../util/domain-name.ts';
import { badRequest, conflict, forbidden, notFound } from '../util/errors.ts';
import { newId } from '../util/ids.ts';
import { KeyedMutex } from '../util/keyed-mutex.ts';
import type { SecretBox } from '../util/secret-box.ts';
import { isPrintable } from '../util/text.ts';
import { iso, type Clock } from '../util/time.ts';
import type { InboundRoute } from './policy.ts';
import type { RouteTarget } from './route-jobs.ts';
import type { Emitter } from '../util/signals.ts';

/** What Routes tells, after the commit: a disabled route enabled again (its held POSTs resume). */
export interface RouteSignals {
  'route.enabled': RouteRecord;
}

/** Routes per account: the inbound MX reads a domain's routes for every recipient. */
export const MAX_ROUTES_PER_ACCOUNT = 1000;

export interface RouteOptionsInput {
  attachments: boolean;
  headers: boolean;
  groupByMessageId: boolean;
  stripReplies: boolean;
  enabled: boolean;
}

export interface NewRoute extends RouteOptionsInput {
  name: string;
  url: string;
  recipient: string;
}

export type RouteChanges = Partial<NewRoute>;

/** A route with its counters, as the API shows it. */
export type RouteView = RouteRecord & TargetCounts;

/** Whether the caller may write or read a route at `domain`; absent for the operator. */
export type MayUse = (domain: string) => boolean;

/**
 * Inbound routes: CRUD for the API, and for the inbound side the enabled routes at a domain and
 * a route's secret in clear. The recipient pattern's domain must be a domain of the account; it
 * drives the scope checks. The secret (`aha-rsec-` + 64) is returned once and kept sealed.
 */
export class Routes {
  constructor(
    private readonly store: Store,
    private readonly repo: RoutesRepo,
    private readonly domains: DomainsRepo,
    private readonly box: SecretBox,
    private readonly resolver: HostResolver,
    private readonly allowNetworks: () => readonly Cidr[],
    private readonly counters: TargetCounters,
    private readonly clock: Clock,
    private readonly signals: Emitter<RouteSignals>,
    private readonly locks = new KeyedMutex(),
  ) {}

  async create(accountId: string, input: NewRoute, may?: MayUse): Promise<{ route: RouteView; secret: string }> {
    const name = checkName(input.name);
    const { recipient, domainName } = parseRecipient(input.recipient);
    if (may && !may(domainName)) throw forbidden(`this API key may not create routes of ${domainName}`);
    const domain = await this.ownDomain(accountId, domainName);
    const url = await this.checkUrl(input.url);
    return this.locks.run(`account:${accountId}`, async () => {
      if ((await this.repo.countOfAccount(accountId)) >= MAX_ROUTES_PER_ACCOUNT) throw conflict(`an account may have at most ${MAX_ROUTES_PER_ACCOUNT} routes`);
      const secret = newSecret(ROUTE_SECRET_PREFIX);
      const now = iso(this.clock.now());
      const route: RouteRecord = {
        v: 1,
        id: newId(),
        accountId,
        name,
        url,
        recipient,
        domain,
        attachments: input.attachments,
        headers: input.headers,
        groupByMessageId: input.groupByMessageId,
        stripReplies: input.stripReplies,
        enabled: input.enabled,
        secret: this.box.seal(secret),
        createdAt: now,
        updatedAt: now,
      };
      await this.store.commit(this.repo.create(route));
      return { route: await this.counters.overlay(route), secret };
    });
  }

  /** One page of the account's routes in creation order, optionally of one domain. */
  async list(accountId: string, domain: string | undefined, req: PageRequest): Promise<Page<RouteView>> {
    const all = domain === undefined ? await this.repo.ofAccount(accountId) : await this.repo.atDomain(accountId, normalizeDomain(domain));
    const page = pageOfItems(all, req);
    return { ...page, items: await Promise.all(page.items.map((r) => this.counters.overlay(r))) };
  }

  async get(accountId: string, id: string, may?: MayUse): Promise<RouteView> {
    const route = await this.repo.get(id);
    if (!route || route.accountId !== accountId) throw notFound('route not found');
    if (may && !may(route.domain.name)) throw forbidden(`this API key may not read routes of ${route.domain.name}`);
    return this.counters.overlay(route);
  }

  async update(accountId: string, id: string, changes: RouteChanges, may?: MayUse): Promise<RouteView> {
    const name = changes.name === undefined ? undefined : checkName(changes.name);
    const parsed = changes.recipient === undefined ? undefined : parseRecipient(changes.recipient);
    const url = changes.url === undefined ? undefined : await this.checkUrl(changes.url);
    return this.locks.run(`route:${id}`, async () => {
      const current = await this.repo.get(id);
      if (!current || current.accountId !== accountId) throw notFound('route not found');
      if (may && !may(current.domain.name)) throw forbidden(`this API key may not update routes of ${current.domain.name}`);
      if (parsed && may && !may(parsed.domainName)) throw forbidden(`this API key may not move routes to ${parsed.domainName}`);
      const domain = parsed ? await this.ownDomain(accountId, parsed.domainName) : current.domain;
      const next: RouteRecord = {
        ...current,
        name: name ?? current.name,
        url: url ?? current.url,
        recipient: parsed?.recipient ?? current.recipient,
        domain,
        attachments: changes.attachments ?? current.attachments,
        headers: changes.headers ?? current.headers,
        groupByMessageId: changes.groupByMessageId ?? current.groupByMessageId,
        stripReplies: changes.stripReplies ?? current.stripReplies,
        enabled: changes.enabled ?? current.enabled,
        updatedAt: iso(this.clock.now()),
      };
      const enabled = next.enabled && !current.enabled;
      await this.store.commit([...this.repo.update(current, next), ...(enabled ? [await this.counters.resetErrors(id)] : [])]);
      if (enabled) this.signals.emit('route.enabled', next);
      return this.counters.overlay(next);
    });
  }

  async delete(accountId: string, id: string, may?: MayUse): Promise<RouteRecord> {
    return this.locks.run(`route:${id}`, async () => {
      const route = await this.repo.get(id);
      if (!route || route.accountId !== accountId) throw notFound('route not found');
      if (may && !may(route.domain.name)) throw forbidden(`this API key may not delete routes of ${route.domain.name}`);
      await this.store.commit([...this.repo.delete(route), this.counters.forget(route.id)]);
      return route;
    });
  }

  /** Disables a route whose POSTs keep failing; false when it is gone or already disabled. */
  async disable(id: string): Promise<boolean> {
    return this.locks.run(`route:${id}`, async () => {
      const current = await this.repo.get(id);
      if (!current || !current.enabled) return false;
      await this.store.commit(this.repo.update(current, { ...current, enabled: false, updatedAt: iso(this.clock.now()) }));
      return true;
    });
  }

  /** The account's routes at a domain that still is the account's (the inbound MX asks per recipient). */
  async routesAt(accountId: string, domainName: string): Promise<InboundRoute[]> {
    const domain = await this.domains.getByName(domainName);
    if (!domain || domain.accountId !== accountId) return [];
    return (await this.repo.atDomain(accountId, domain.name)).filter((r) => r.domain.id === domain.id);
  }

  /** A route as its POSTs need it (undefined when deleted). */
  async target(id: string): Promise<RouteTarget | undefined> {
    return this.repo.get(id);
  }

  secretOf(route: { secret: string }): string {
    return this.box.open(route.secret);
  }

  private async ownDomain(accountId: string, name: string): Promise<{ id: string; name: string }> {
    const domain = await this.domains.getByName(name);
    if (!domain || domain.accountId !== accountId) throw badRequest(`domain ${name} of recipient is not a domain of this account`);
    return { id: domain.id, name: domain.name };
  }

  private async checkUrl(text: string): Promise<string> {
    try {
      return (await checkTargetUrl(text, this.resolver, this.allowNetworks())).href;
    } catch (err) {
      if (err instanceof TargetRefusedError) throw badRequest(err.message);
      throw err;
    }
  }
}

/**
 * `local@domain`: the local part exact, or with one `*` alone, at its start or at its end
 * (`*`, `ticket-*`, `*-support`). Lower-cased.
 */
export function parseRecipient(text: string): { recipient: string; domainName: string } {
  const value = text.trim().toLowerCase();
  const at = value.lastIndexOf('@');
  const bad = (why: string) =>
    badRequest(
      `recipient "${text.slice(0, 100)}" ${why}: give an address or a pattern like *@example.com, ticket-*@example.com or *-support@example.com at a domain of the account`,
    );
  if (value.length === 0 || value.length > 255 || !isPrintable(value) || /\s/.test(value)) throw bad('is not valid');
  if (at <= 0 || at === value.length - 1) throw bad('has no local part or no domain');
  const local = value.slice(0, at);
  const domainName = normalizeDomain(value.slice(at + 1));
  const stars = local.split('*').length - 1;
  if (stars > 1 || (stars === 1 && !(local === '*' || local.startsWith('*') || local.endsWith('*'))))
    throw bad('may have one * only, alone or at the start or end of the local part');
  if (local.length > 64 || !/^[a-z0-9!#$%&'*+/=?^_`{|}~.-]+$/.test(local) || local.startsWith('.') || local.endsWith('.') || local.includes('..'))
    throw bad('has an invalid local part');
  return { recipient: `${local}@${domainName}`, domainName };
}

function checkName(text: string): string {
  const name = text.trim();
  if (name.length === 0 || name.length > 255) throw badRequest('name must be 1 to 255 characters');
  if (!isPrintable(name)) throw badRequest('name must not contain control characters');
  return name;
}
