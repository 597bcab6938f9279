// The operator's accounts (#/operator/accounts): every account with its status; suspend (with a
// reason, which the account's owner is shown) and unsuspend.
import { useState } from 'preact/hooks';
import { operator } from '../../api.ts';
import { Badge, ErrorBox, messageOf, Page, Show, useLoad, When } from '../../ui.tsx';
import { ConfirmDialog } from '../kit/confirm.tsx';
import type { AccountView } from './types.ts';

/** The reason the admin operation takes is 1..500 characters. */
const MAX_REASON = 500;

export function AccountsScreen() {
  const list = useLoad(() => operator.get<{ accounts: AccountView[] }>('/accounts'), []);
  const [suspending, setSuspending] = useState<AccountView | null>(null);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const unsuspend = async (a: AccountView) => {
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      const after = await operator.post<AccountView>('/accounts/unsuspend', { account: a.id });
      setNotice(`Unsuspended “${after.name}”: it is ${after.status}; its held mail goes out.`);
      list.reload();
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Page
      title="Accounts"
      actions={
        <button type="button" class="secondary" onClick={list.reload}>
          Refresh
        </button>
      }
    >
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
      <ErrorBox error={error} />
      <Show loaded={list}>
        {({ accounts }) => {
          const names = new Map(accounts.map((a) => [a.id, a.name]));
          return accounts.length === 0 ? (
            <p class="muted">No accounts yet: create one with `postilion accounts create`.</p>
          ) : (
            <div class="table-wrap">
              <table>
                <caption>Accounts</caption>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Status</th>
                    <th scope="col">Parent</th>
                    <th scope="col">Suspension</th>
                    <th scope="col">Actions</th>
                  </tr>
                </thead>
                <tbody>
                  {accounts.map((a) => (
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
                          <button type="button" class="danger small" disabled={busy} aria-describedby={`account-${a.id}`} onClick={() => setSuspending(a)}>
                            Suspend
                          </button>
                        ) : a.status === 'suspended' ? (
                          <button type="button" class="secondary small" disabled={busy} aria-describedby={`account-${a.id}`} onClick={() => void unsuspend(a)}>
                            Unsuspend
                          </button>
                        ) : null}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
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
