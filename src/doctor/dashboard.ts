import type { Config } from '../config/schema.ts';
import { defaultAssetsDir, isBuilt } from '../dashboard/assets.ts';
import { fail, ok, type Check } from './check.ts';

/** With the dashboard on, its built page must be there, or every /ui page answers 503. */
export function checkDashboard(config: Config, dir: string = defaultAssetsDir()): Check {
  if (!config.dashboard.enabled) return ok('dashboard', 'off (dashboard.enabled: false)');
  if (isBuilt(dir)) return ok('dashboard', `built: ${dir}`);
  return fail('dashboard', `dashboard.enabled is true but ${dir} has no index.html: run npm run build (the /ui pages answer 503 until then)`);
}
