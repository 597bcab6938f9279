import type { DashboardRoute } from './contract.ts';
import type { DashboardRouteDeps } from './route-deps.ts';

/** Dashboard-only reads and actions (`/ui/api/dashboard/...`). Placeholder until they land. */
export function dashboardRoutes(deps: DashboardRouteDeps): DashboardRoute[] {
  void deps;
  return [];
}
