import { normalizeDomain, isValidDomain } from '../util/domain-name.ts';

/** Scopes that take no domain. */
export const STATIC_SCOPES = [
  'domains:read',
  'domains:write',
  'accounts:read',
  'accounts:write',
  'accounts:billing',
  'accounts:members:read',
  'accounts:members:add',
  'accounts:members:update',
  'accounts:members:remove',
  'suppressions:read',
  'suppressions:write',
  'suppressions:delete',
  'suppressions:wipe',
  'api-keys:read',
  'api-keys:write',
  'api-keys:delete',
  'sub-accounts:read',
  'sub-accounts:write',
  'sub-accounts:delete',
  'sub-accounts:suspend',
  'sub-accounts:usage',
  'sub-account-api-keys:read',
  'sub-account-api-keys:write',
  'sub-account-api-keys:delete',
] as const;

/** Families that come as `<family>:all` or `<family>:{domain}`. */
export const DOMAIN_FAMILIES = [
  'messages:send',
  'messages:cancel',
  'messages:read',
  'domains:delete',
  'webhooks:read',
  'webhooks:write',
  'webhooks:delete',
  'routes:read',
  'routes:write',
  'routes:delete',
  'smtp-credentials:read',
  'smtp-credentials:write',
  'smtp-credentials:delete',
  'statistics-transactional:read',
] as const;

export type DomainFamily = (typeof DOMAIN_FAMILIES)[number];

export type Scope =
  { kind: 'wildcard' } | { kind: 'static'; scope: string } | { kind: 'all'; family: DomainFamily } | { kind: 'domain'; family: DomainFamily; domain: string };

/** Every scope a key can hold without naming a domain: what the bootstrap admin key gets. */
export const EVERY_GLOBAL_SCOPE: string[] = [...STATIC_SCOPES, ...DOMAIN_FAMILIES.map((f) => `${f}:all`)];

const staticSet = new Set<string>(STATIC_SCOPES);
const familySet = new Set<string>(DOMAIN_FAMILIES);

/** Parses a scope string; domain scopes are written `family:{example.com}`. Null when invalid. */
export function parseScope(text: string): Scope | null {
  const value = text.trim();
  if (value === '*') return { kind: 'wildcard' };
  if (staticSet.has(value)) return { kind: 'static', scope: value };
  const match = /^(.+):(all|\{([^{}]+)\})$/.exec(value);
  if (!match || !familySet.has(match[1]!)) return null;
  const family = match[1] as DomainFamily;
  if (match[2] === 'all') return { kind: 'all', family };
  const domain = normalizeDomain(match[3]!);
  return isValidDomain(domain) ? { kind: 'domain', family, domain } : null;
}

export function formatScope(scope: Scope): string {
  switch (scope.kind) {
    case 'wildcard':
      return '*';
    case 'static':
      return scope.scope;
    case 'all':
      return `${scope.family}:all`;
    case 'domain':
      return `${scope.family}:{${scope.domain}}`;
  }
}

/** What a key holds, indexed for the checks. */
export class Grants {
  private readonly wildcard: boolean;
  private readonly statics = new Set<string>();
  private readonly all = new Set<DomainFamily>();
  private readonly domains = new Map<DomainFamily, Set<string>>();

  constructor(scopes: Iterable<string>) {
    let wildcard = false;
    for (const text of scopes) {
      const scope = parseScope(text);
      if (!scope) continue;
      switch (scope.kind) {
        case 'wildcard':
          wildcard = true;
          break;
        case 'static':
          this.statics.add(scope.scope);
          break;
        case 'all':
          this.all.add(scope.family);
          break;
        case 'domain': {
          const set = this.domains.get(scope.family) ?? new Set<string>();
          set.add(scope.domain);
          this.domains.set(scope.family, set);
          break;
        }
      }
    }
    this.wildcard = wildcard;
  }

  /**
   * Whether one role is held. A role is a scope string; `family:{domain}` is a placeholder for
   * the domain of the resource. With `domain` undefined it asks "for some domain?" (the gate
   * before the resource is known); with a domain it asks for that domain.
   * Order: `*`, exact, matching `:all`, domain scope.
   */
  holds(role: string, domain?: string): boolean {
    if (this.wildcard) return true;
    if (this.statics.has(role)) return true;
    const match = /^(.+):(all|\{domain\})$/.exec(role);
    if (!match || !familySet.has(match[1]!)) return false;
    const family = match[1] as DomainFamily;
    if (this.all.has(family)) return true;
    if (match[2] === 'all') return false;
    const held = this.domains.get(family);
    if (!held) return false;
    return domain === undefined ? held.size > 0 : held.has(normalizeDomain(domain));
  }

  /**
   * Whether a key holding these grants may hand `scope` to another key: it must hold it itself
   * (the wildcard only from a wildcard, `:all` only from `:all`).
   */
  covers(scope: Scope): boolean {
    switch (scope.kind) {
      case 'wildcard':
        return this.wildcard;
      case 'static':
        return this.holds(scope.scope);
      case 'all':
        return this.holds(`${scope.family}:all`);
      case 'domain':
        return this.holds(`${scope.family}:{domain}`, scope.domain);
    }
  }

  /** Whether the key holds `family:all` (or `*`): it then sees every domain's resources. */
  holdsAll(family: DomainFamily): boolean {
    return this.wildcard || this.all.has(family);
  }

  /** The domains a domain-scoped key may act on for a family (empty when it holds `:all`). */
  domainsFor(family: DomainFamily): string[] {
    return [...(this.domains.get(family) ?? [])];
  }
}

/** Alternatives of joint role sets: satisfied when every role of at least one set is held. */
export type Security = string[][];

export function satisfies(grants: Grants, security: Security, domain?: string): boolean {
  if (security.length === 0) return true;
  return security.some((joint) => joint.every((role) => grants.holds(role, domain)));
}

export interface ValidatedScope {
  scope: string;
  /** The owned domain's id, for domain scopes. */
  domainId: string | null;
}

/** Resolves a domain name to the id of that domain in the account, or null when not owned. */
export type DomainOwnership = (accountId: string, domain: string) => Promise<string | null>;

export class ScopeError extends Error {}

/**
 * Checks a requested scope list: every entry must parse, no duplicates, domain scopes only for
 * owned domains; a domain scope made redundant by the same family's `:all` is dropped.
 */
export async function validateScopes(requested: string[], accountId: string, ownership: DomainOwnership): Promise<ValidatedScope[]> {
  const parsed: Scope[] = [];
  const seen = new Set<string>();
  for (const text of requested) {
    const scope = parseScope(text);
    if (!scope) throw new ScopeError(`invalid scope "${text}"`);
    const canonical = formatScope(scope);
    if (seen.has(canonical)) throw new ScopeError(`duplicate scope "${text}"`);
    seen.add(canonical);
    parsed.push(scope);
  }
  const out: ValidatedScope[] = [];
  for (const scope of parsed) {
    if (scope.kind !== 'domain') {
      out.push({ scope: formatScope(scope), domainId: null });
      continue;
    }
    if (seen.has(`${scope.family}:all`)) continue;
    const domainId = await ownership(accountId, scope.domain);
    if (domainId === null) throw new ScopeError(`domain ${scope.domain} in scope "${formatScope(scope)}" is not a domain of this account`);
    out.push({ scope: formatScope(scope), domainId });
  }
  return out;
}
