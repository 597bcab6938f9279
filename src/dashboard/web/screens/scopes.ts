// What the signed-in key may do, read from its scopes, so a screen offers only the actions the
// server would allow. The server decides every request anyway; this only spares a person buttons
// that can only answer 403.
import type { SessionInfo } from '../api.ts';

/** True when the key holds `family` for every domain: `*` or `<family>:all`. */
export function holdsAll(session: SessionInfo, family: string): boolean {
  return session.scopes.includes('*') || session.scopes.includes(`${family}:all`);
}

/** The domains of `<family>:{domain}` scopes the key holds. */
export function domainsFor(session: SessionInfo, family: string): string[] {
  const prefix = `${family}:{`;
  return session.scopes.filter((s) => s.startsWith(prefix) && s.endsWith('}')).map((s) => s.slice(prefix.length, -1));
}

/** True when the key holds `family` for at least one domain. */
export function holdsAny(session: SessionInfo, family: string): boolean {
  return holdsAll(session, family) || domainsFor(session, family).length > 0;
}
