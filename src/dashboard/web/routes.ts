// Every screen, by module. Each module exports its routes; the shell matches and draws them.
import type { ScreenRoute } from './screens/types.ts';
import { routes as messages } from './screens/messages.tsx';
import { routes as domains } from './screens/domains.tsx';
import { routes as webhooks } from './screens/webhooks.tsx';
import { routes as inboundRoutes } from './screens/routes.tsx';
import { routes as statistics } from './screens/statistics.tsx';
import { routes as access } from './screens/access.tsx';
import { routes as operator } from './screens/operator.tsx';

export const ROUTES: ScreenRoute[] = [...messages, ...domains, ...webhooks, ...inboundRoutes, ...statistics, ...access, ...operator];

/** The route for a hash path, with its parameters; null when none matches. */
export function match(path: string, kind: 'account' | 'operator'): { route: ScreenRoute; params: Record<string, string> } | null {
  const parts = path.split('/').filter(Boolean);
  for (const route of ROUTES) {
    if (route.for !== kind) continue;
    const pattern = route.path.split('/').filter(Boolean);
    if (pattern.length !== parts.length) continue;
    const params: Record<string, string> = {};
    let ok = true;
    for (let i = 0; i < pattern.length && ok; i++) {
      const p = pattern[i]!;
      const value = parts[i]!;
      if (p.startsWith(':')) {
        try {
          params[p.slice(1)] = decodeURIComponent(value);
        } catch {
          ok = false;
        }
      } else ok = p === value;
    }
    if (ok) return { route, params };
  }
  return null;
}
