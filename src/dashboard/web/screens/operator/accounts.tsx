// The operator's accounts (#/operator/accounts): every account with its status; suspend (with a
// reason, which the account's owner is shown) and unsuspend.
import { useState } from 'preact/hooks';
import { operator } from '../../api.ts';
import { Badge, Page, Show, useLoad, When } from '../../ui.tsx';
import { ConfirmDialog } from '../kit/confirm.tsx';
import { useActions } from '../kit/form.tsx';
import { RowButton, Table } from '../kit/list-table.tsx';
import type { AccountView } from './types.ts';

/** The reason the admin operation takes is 1..500 characters. */
const MAX_REASON = 500;

export function AccountsScreen() {
  const list = useLoad(() => operator.get<{ accounts: AccountView[] }>('/accounts'), []);
  const [suspending, setSuspending] = useState<AccountView | null>(null);
  const { act, busy, setNotice, status } = useActions();

  const unsuspend = (a: AccountView) =>
    act(async () => {
      const after = await operator.post<AccountView>('/accounts/unsuspend', { account: a.id });
      list.reload();
      return `Unsuspended “${after.name}”: it is ${after.status}; its held mail goes out.`;
    });

  return (
    <Page
      title="Accounts"
      actions={
        <button type="button" class="secondary" onClick={list.reload}>
          Refresh
        </button>
      }
    >
      {status}
      <Show loaded={list}>
        {({ accounts }) => {
          const names = new Map(accounts.map((a) => [a.id, a.name]));
          return (
            <Table
              caption="Accounts"
              columns={['Name', 'Status', 'Parent', 'Suspension', 'Actions']}
              items={accounts}
              empty="No accounts yet: create one with `postilion accounts create`."
              row={(a) => (
                <tr key={a.id}>
                  <th scope="row" id={`account-${a.id}`}>
                    {a.name}
                    <br />
                    <code class="muted">{a.id}</code>
                  </th>
                  <td>
                    <Badge value={a.status} />
                  </td>
                  <td>{a.parent_account_id ? (names.get(a.parent_account_id) ?? <code>{a.parent_account_id}</code>) : <span class="muted">—</span>}</td>
                  <td>
                    {a.suspension ? (
                      <>
                        {a.suspension.reason}
                        <br />
                        <span class="muted">
                          by {a.suspension.by}, <When at={a.suspension.at} />
                        </span>
                      </>
                    ) : a.status === 'parent-suspended' ? (
                      <span class="muted">with its parent</span>
                    ) : (
                      <span class="muted">—</span>
                    )}
                  </td>
                  <td class="actions-cell">
                    {a.status === 'active' ? (
                      <RowButton of={`account-${a.id}`} look="danger" disabled={busy} onClick={() => setSuspending(a)}>
                        Suspend
                      </RowButton>
                    ) : a.status === 'suspended' ? (
                      <RowButton of={`account-${a.id}`} disabled={busy} onClick={() => void unsuspend(a)}>
                        Unsuspend
                      </RowButton>
                    ) : null}
                  </td>
                </tr>
              )}
            />
          );
        }}
      </Show>
      {suspending ? (
        <ConfirmDialog
          title={`Suspend the account “${suspending.name}”?`}
          confirmLabel="Suspend account"
          danger
          reason={{ label: 'Reason', max: MAX_REASON }}
          onConfirm={async (reason) => {
            const after = await operator.post<AccountView>('/accounts/suspend', { account: suspending.id, reason });
            setNotice(`Suspended “${after.name}”.`);
            list.reload();
          }}
          onClose={() => setSuspending(null)}
        >
          <p>
            Its keys and SMTP credentials are refused and its queued mail is held until it is unsuspended
            {suspending.parent_account_id === null ? '; its active sub-accounts are suspended with it' : ''}.
          </p>
        </ConfirmDialog>
      ) : null}
    </Page>
  );
}
