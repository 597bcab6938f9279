// What a key may reach of its account's access and people: API keys, SMTP credentials,
// suppressions, members, sub-accounts. Each screen is the API's operations, with the key's rights.
import type { ScreenRoute } from './types.ts';
import { ApiKeysScreen } from './access/api-keys.tsx';
import { MembersScreen } from './access/members.tsx';
import { SmtpCredentialsScreen } from './access/smtp-credentials.tsx';
import { SubAccountScreen } from './access/sub-account.tsx';
import { SubAccountsScreen } from './access/sub-accounts.tsx';
import { SuppressionsScreen } from './access/suppressions.tsx';

export const routes: ScreenRoute[] = [
  { path: '/api-keys', for: 'account', nav: { label: 'API keys', order: 60 }, render: (_p, session) => <ApiKeysScreen session={session} /> },
  {
    path: '/smtp-credentials',
    for: 'account',
    nav: { label: 'SMTP credentials', order: 70 },
    render: (_p, session) => <SmtpCredentialsScreen session={session} />,
  },
  { path: '/suppressions', for: 'account', nav: { label: 'Suppressions', order: 80 }, render: (_p, session) => <SuppressionsScreen session={session} /> },
  { path: '/members', for: 'account', nav: { label: 'Members', order: 90 }, render: (_p, session) => <MembersScreen session={session} /> },
  { path: '/sub-accounts', for: 'account', nav: { label: 'Sub-accounts', order: 100 }, render: (_p, session) => <SubAccountsScreen session={session} /> },
  { path: '/sub-accounts/:id', for: 'account', render: (p, session) => <SubAccountScreen key={p.id} session={session} id={p.id!} /> },
];
