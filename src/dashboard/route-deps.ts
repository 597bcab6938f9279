import type { Context, Readiness } from '../assemblies/lifecycle.ts';
import type { DashboardSessions } from './sessions.ts';

/** What the dashboard's route factories (operator.ts `operatorRoutes`, activity.ts `dashboardRoutes`) are given. */
export interface DashboardRouteDeps {
  /** The API assembly's context: config (as started), core services (core.*), log, metrics, storage guard. */
  context: Context;
  /** The configuration now (reloads included). */
  config: () => Context['config'];
  sessions: DashboardSessions;
  /** Each component's readiness, as /readyz reports it. */
  readiness: () => Readiness[];
}
