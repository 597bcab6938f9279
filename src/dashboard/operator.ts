import type { DashboardRoute } from './contract.ts';
import type { DashboardRouteDeps } from './route-deps.ts';

/** The operator's page (`/ui/api/operator/...`). Placeholder until the operator's routes land. */
export function operatorRoutes(deps: DashboardRouteDeps): DashboardRoute[] {
  void deps;
  return [];
}
