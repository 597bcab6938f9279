// Members (#/members): the people of the account and their roles. List, add, remove.
import { useId, useState } from 'preact/hooks';
import { v2, type SessionInfo } from '../../api.ts';
import { Badge, ErrorBox, messageOf, Page, Show, useLoad, When } from '../../ui.tsx';
import { ConfirmDialog } from '../kit/confirm.tsx';
import type { ListPage } from '../kit/paging.tsx';
import { seg } from '../kit/text.ts';

interface Member {
  user_id: string;
  role: string;
  created_at: string;
  updated_at: string;
}

/** The roles the API takes (MEMBER_ROLES in the store's records). */
const ROLES = ['Administrator', 'Developer', 'Analyst', 'Billing Manager'] as const;

export function MembersScreen(props: { session: SessionInfo }) {
  const path = `/accounts/${seg(props.session.account_id ?? '')}/members`;
  const list = useLoad(() => v2.get<ListPage<Member>>(path), [path]);
  const [adding, setAdding] = useState(false);
  const [removing, setRemoving] = useState<Member | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  return (
    <Page
      title="Members"
      actions={
        adding ? null : (
          <button type="button" onClick={() => (setAdding(true), setNotice(null))}>
            Add member
          </button>
        )
      }
    >
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
      {adding ? (
        <MemberForm
          onCancel={() => setAdding(false)}
          onAdd={async (body) => {
            const member = await v2.post<Member>(path, body);
            setAdding(false);
            setNotice(`Added ${body.email} as ${member.role} (user ${member.user_id}).`);
            list.reload();
          }}
        />
      ) : null}
      <Show loaded={list}>
        {(page) =>
          page.data.length === 0 ? (
            <p class="muted">No members yet.</p>
          ) : (
            <div class="table-wrap">
              <table>
                <caption>Members</caption>
                <thead>
                  <tr>
                    <th scope="col">User ID</th>
                    <th scope="col">Role</th>
                    <th scope="col">Added</th>
                    <th scope="col">Actions</th>
                  </tr>
                </thead>
                <tbody>
                  {page.data.map((m) => (
                    <tr key={m.user_id}>
                      <th scope="row" id={`member-${m.user_id}`}>
                        <code>{m.user_id}</code>
                      </th>
                      <td>
                        <Badge value={m.role} tone="neutral" />
                      </td>
                      <td>
                        <When at={m.created_at} />
                      </td>
                      <td class="actions-cell">
                        <button type="button" class="danger small" aria-describedby={`member-${m.user_id}`} onClick={() => setRemoving(m)}>
                          Remove
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Show>
      {removing ? (
        <ConfirmDialog
          title="Remove this member?"
          confirmLabel="Remove member"
          danger
          onConfirm={async () => {
            await v2.delete(`${path}/${seg(removing.user_id)}`);
            setNotice(`Removed the member ${removing.user_id}.`);
            list.reload();
          }}
          onClose={() => setRemoving(null)}
        >
          <p>
            The user <code>{removing.user_id}</code> ({removing.role}) leaves the account.
          </p>
        </ConfirmDialog>
      ) : null}
    </Page>
  );
}

interface MemberBody {
  email: string;
  name?: string;
  role: string;
}

function MemberForm(props: { onAdd: (body: MemberBody) => Promise<void>; onCancel: () => void }) {
  const id = useId();
  const [email, setEmail] = useState('');
  const [name, setName] = useState('');
  const [role, setRole] = useState<string>('Developer');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const body: MemberBody = { email: email.trim(), role };
    if (name.trim()) body.name = name.trim();
    setBusy(true);
    setError(null);
    try {
      await props.onAdd(body);
    } catch (err) {
      setError(messageOf(err));
      setBusy(false);
    }
  };
  return (
    <form class="stack card" onSubmit={(e) => void submit(e)} aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>Add a member</h2>
      <div>
        <label for={`${id}-email`}>Email address</label>
        <input id={`${id}-email`} type="email" required maxLength={254} value={email} onInput={(e) => setEmail((e.target as HTMLInputElement).value)} />
      </div>
      <div>
        <label for={`${id}-name`}>Name</label>
        <input id={`${id}-name`} maxLength={255} value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      </div>
      <div>
        <label for={`${id}-role`}>Role</label>
        <select id={`${id}-role`} value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value)}>
          {ROLES.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
      </div>
      <ErrorBox error={error} />
      <div class="actions">
        <button type="submit" disabled={busy}>
          Add member
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
