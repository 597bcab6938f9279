// Members (#/members): the people of the account and their roles. List, add, remove.
import { useId, useState } from 'preact/hooks';
import { v2, type SessionInfo } from '../../api.ts';
import { Badge, Page, Show, useLoad, When } from '../../ui.tsx';
import { ConfirmDialog } from '../kit/confirm.tsx';
import { TextField } from '../kit/fields.tsx';
import { FormCard, Notice } from '../kit/form.tsx';
import { ListTable, RowButton } from '../kit/list-table.tsx';
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
      <Notice text={notice} />
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
        {(page) => (
          <ListTable
            caption="Members"
            columns={['User ID', 'Role', 'Added', 'Actions']}
            page={page}
            empty="No members yet."
            row={(m) => (
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
                  <RowButton of={`member-${m.user_id}`} look="danger" onClick={() => setRemoving(m)}>
                    Remove
                  </RowButton>
                </td>
              </tr>
            )}
          />
        )}
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
  const submit = async () => {
    const body: MemberBody = { email: email.trim(), role };
    if (name.trim()) body.name = name.trim();
    await props.onAdd(body);
  };
  return (
    <FormCard card title="Add a member" submitLabel="Add member" onSubmit={submit} onCancel={props.onCancel}>
      <TextField label="Email address" type="email" required maxLength={254} value={email} onInput={setEmail} />
      <TextField label="Name" maxLength={255} value={name} onInput={setName} />
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
    </FormCard>
  );
}
