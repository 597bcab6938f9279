// The operator's screens (an operator session only): the queue, the accounts, the system.
import type { ScreenRoute } from './types.ts';
import { AccountsScreen } from './operator/accounts.tsx';
import { QueueScreen } from './operator/queue.tsx';
import { SystemScreen } from './operator/system.tsx';

export const routes: ScreenRoute[] = [
  { path: '/operator/queue', for: 'operator', nav: { label: 'Queue', order: 10 }, render: () => <QueueScreen /> },
  { path: '/operator/accounts', for: 'operator', nav: { label: 'Accounts', order: 20 }, render: () => <AccountsScreen /> },
  { path: '/operator/system', for: 'operator', nav: { label: 'System', order: 30 }, render: () => <SystemScreen /> },
];
