import type { VNode } from 'preact';
import type { SessionInfo } from '../api.ts';

/**
 * One screen of the dashboard at a hash route: `path` is matched against the part after `#`,
 * `:name` segments are handed to `render` (decoded). `nav` puts it in the main navigation.
 */
export interface ScreenRoute {
  path: string;
  /** Who may open it: an account session (a key) or the operator. */
  for: 'account' | 'operator';
  nav?: { label: string; order: number };
  render: (params: Record<string, string>, session: SessionInfo) => VNode;
}
