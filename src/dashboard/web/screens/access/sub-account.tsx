// One sub-account (#/sub-accounts/<id>): its figures, suspend/unsuspend, edit, delete, and its
// API keys (which only the parent's keys manage).
import { useState } from 'preact/hooks';
import { v2, type SessionInfo } from '../../api.ts';
import { Badge, go, Page, Show, useLoad, When } from '../../ui.tsx';
import { Notice } from '../kit/form.tsx';
import { seg } from '../kit/text.ts';
import { KeysPanel } from './keys.tsx';
import { SubAccountButtons, SubAccountDialog, subAccountsPath, type SubAccount, type SubAccountAction } from './sub-account-actions.tsx';
import { SubAccountForm } from './sub-accounts.tsx';

export function SubAccountScreen(props: { session: SessionInfo; id: string }) {
  const accountId = props.session.account_id ?? '';
  const path = `${subAccountsPath(accountId)}/${seg(props.id)}`;
  const sub = useLoad(() => v2.get<SubAccount>(path), [path]);
  const [editing, setEditing] = useState(false);
  const [action, setAction] = useState<SubAccountAction | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  return (
    <Page
      title={sub.data?.name ?? 'Sub-account'}
      actions={
        sub.data && !editing ? (
          <>
            {sub.data.status !== 'deleted' ? (
              <button type="button" class="secondary" onClick={() => (setEditing(true), setNotice(null))}>
                Edit
              </button>
            ) : null}
            <SubAccountButtons sub={sub.data} onAction={setAction} />
          </>
        ) : null
      }
    >
      <p>
        <a href="#/sub-accounts">All sub-accounts</a>
      </p>
      <Notice text={notice} />
      <Show loaded={sub}>
        {(s) => (
          <>
            {editing ? (
              <SubAccountForm
                editing={s}
                onCancel={() => setEditing(false)}
                onCreate={async (body) => {
                  await v2.put<SubAccount>(path, body);
                  setEditing(false);
                  setNotice('Saved.');
                  sub.reload();
                }}
              />
            ) : null}
            <dl class="fields">
              <dt>Status</dt>
              <dd>
                <Badge value={s.status} />
              </dd>
              <dt>Sub-account ID</dt>
              <dd>
                <code>{s.id}</code>
              </dd>
              <dt>Website</dt>
              <dd>{s.website}</dd>
              <dt>Monthly credit</dt>
              <dd>{s.monthly_credit === 0 ? 'no cap' : s.monthly_credit}</dd>
              <dt>Domains</dt>
              <dd>{s.domain_count}</dd>
              <dt>Members</dt>
              <dd>{s.member_count}</dd>
              <dt>Last activity</dt>
              <dd>
                <When at={s.last_activity_at} />
              </dd>
              <dt>Created</dt>
              <dd>
                <When at={s.created_at} />
              </dd>
            </dl>
            <h2>API keys</h2>
            <p class="muted">Keys of the sub-account: used with its ID as the account in the API&apos;s paths. Only this account&apos;s keys manage them.</p>
            {s.status === 'deleted' ? (
              <p class="muted">The sub-account is deleted.</p>
            ) : (
              <KeysPanel path={`${path}/api-keys`} session={props.session} caption={`API keys of ${s.name}`} />
            )}
          </>
        )}
      </Show>
      {action ? (
        <SubAccountDialog
          accountId={accountId}
          action={action}
          onDone={(message) => {
            if (action.kind === 'delete') go('/sub-accounts');
            else {
              setNotice(message);
              sub.reload();
            }
          }}
          onClose={() => setAction(null)}
        />
      ) : null}
    </Page>
  );
}
