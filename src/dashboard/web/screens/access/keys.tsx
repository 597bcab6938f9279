// API keys: of the signed-in account (#/api-keys), or of one of its sub-accounts (the parent's
// keys manage them). List, create (the secret shown once), edit, delete.
import { useState } from 'preact/hooks';
import type { SessionInfo } from '../../api.ts';
import { v2 } from '../../api.ts';
import { Badge, Show, useLoad, When } from '../../ui.tsx';
import { ConfirmDialog } from '../kit/confirm.tsx';
import { TextField } from '../kit/fields.tsx';
import { FormCard, Notice } from '../kit/form.tsx';
import { ListTable, RowButton } from '../kit/list-table.tsx';
import { useCursor, type ListPage } from '../kit/paging.tsx';
import { ShownOnce } from '../kit/shown-once.tsx';
import { items } from '../kit/text.ts';
import { ScopePicker, scopeChoiceOf, scopesOf, type ScopeChoice } from './scope-picker.tsx';

export interface ApiKey {
  id: string;
  label: string;
  public_key: string;
  created_at: string;
  updated_at: string;
  last_used_at: string | null;
  scopes: Array<{ scope: string }>;
  ip_allow_list: string[];
}

interface KeyBody {
  label: string;
  scopes: string[];
  ip_allow_list: string[];
}

/** The API allows at most 100 entries (after canonicalising). */
const MAX_ALLOW = 100;

/** `path`: the keys' collection (`/accounts/<id>/api-keys` or a sub-account's). */
export function KeysPanel(props: { path: string; session: SessionInfo; caption: string }) {
  const { cursor, setCursor } = useCursor();
  const list = useLoad(() => v2.get<ListPage<ApiKey>>(props.path, { ...cursor }), [props.path, cursor]);
  const [form, setForm] = useState<{ editing: ApiKey | null } | null>(null);
  const [created, setCreated] = useState<(ApiKey & { secret_key: string }) | null>(null);
  const [deleting, setDeleting] = useState<ApiKey | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  const save = async (body: KeyBody) => {
    if (form?.editing) {
      await v2.put<ApiKey>(`${props.path}/${encodeURIComponent(form.editing.id)}`, body);
      setNotice(`Saved the key “${body.label}”.`);
    } else {
      setCreated(await v2.post<ApiKey & { secret_key: string }>(props.path, body));
      setNotice(null);
    }
    setForm(null);
    list.reload();
  };

  return (
    <>
      {created ? (
        <ShownOnce heading="Secret" what="API key secret" value={created.secret_key} onDone={() => setCreated(null)}>
          <p>
            Key “{created.label}” created. Use it as <code>Authorization: Bearer …</code>.
          </p>
        </ShownOnce>
      ) : null}
      <Notice text={notice} />
      {form ? (
        <KeyForm key={form.editing?.id ?? 'new'} editing={form.editing} onSave={save} onCancel={() => setForm(null)} />
      ) : (
        <div class="actions">
          <button type="button" onClick={() => (setForm({ editing: null }), setNotice(null))}>
            New API key
          </button>
        </div>
      )}
      <Show loaded={list}>
        {(page) => (
          <ListTable
            caption={props.caption}
            columns={['Label', 'Scopes', 'IP allow list', 'Last used', 'Created', 'Actions']}
            page={page}
            empty="No API keys yet."
            cursor={cursor}
            onPage={setCursor}
            row={(key) => (
              <tr key={key.id}>
                <th scope="row" id={`key-${key.id}`}>
                  {key.label} {key.id === props.session.key_id ? <Badge value="this key" tone="neutral" /> : null}
                  <br />
                  <code class="muted">{key.public_key}</code>
                </th>
                <td>
                  <details>
                    <summary>
                      {key.scopes.length} scope{key.scopes.length === 1 ? '' : 's'}
                    </summary>
                    <ul class="plain">
                      {key.scopes.map((s) => (
                        <li key={s.scope}>
                          <code>{s.scope}</code>
                        </li>
                      ))}
                    </ul>
                  </details>
                </td>
                <td>{key.ip_allow_list.length === 0 ? <span class="muted">any address</span> : key.ip_allow_list.join(', ')}</td>
                <td>
                  <When at={key.last_used_at} />
                </td>
                <td>
                  <When at={key.created_at} />
                </td>
                <td class="actions-cell">
                  <RowButton of={`key-${key.id}`} onClick={() => (setForm({ editing: key }), setNotice(null))}>
                    Edit
                  </RowButton>
                  <RowButton of={`key-${key.id}`} look="danger" onClick={() => setDeleting(key)}>
                    Delete
                  </RowButton>
                </td>
              </tr>
            )}
          />
        )}
      </Show>
      {deleting ? (
        <ConfirmDialog
          title={`Delete the API key “${deleting.label}”?`}
          confirmLabel="Delete key"
          danger
          onConfirm={async () => {
            await v2.delete(`${props.path}/${encodeURIComponent(deleting.id)}`);
            setNotice(`Deleted the key “${deleting.label}”.`);
            list.reload();
          }}
          onClose={() => setDeleting(null)}
        >
          <p>Whatever uses this key stops working at once.</p>
          {deleting.id === props.session.key_id ? <p class="notice">This is the key you signed in with: you will be signed out.</p> : null}
        </ConfirmDialog>
      ) : null}
    </>
  );
}

function KeyForm(props: { editing: ApiKey | null; onSave: (body: KeyBody) => Promise<void>; onCancel: () => void }) {
  const [label, setLabel] = useState(props.editing?.label ?? '');
  const [scopes, setScopes] = useState<ScopeChoice>(scopeChoiceOf(props.editing?.scopes.map((s) => s.scope) ?? []));
  const [allow, setAllow] = useState((props.editing?.ip_allow_list ?? []).join('\n'));

  const submit = async () => {
    const body: KeyBody = { label: label.trim(), scopes: scopesOf(scopes), ip_allow_list: items(allow) };
    if (body.scopes.length === 0) return 'Choose at least one scope.';
    if (body.ip_allow_list.length > MAX_ALLOW) return `The IP allow list holds at most ${MAX_ALLOW} entries.`;
    await props.onSave(body);
  };

  return (
    <FormCard
      card
      title={props.editing ? `Edit the key “${props.editing.label}”` : 'New API key'}
      submitLabel={props.editing ? 'Save changes' : 'Create API key'}
      onSubmit={submit}
      onCancel={props.onCancel}
    >
      <TextField label="Label" required maxLength={255} value={label} onInput={setLabel} />
      <ScopePicker value={scopes} onChange={setScopes} />
      <TextField
        label="IP allow list"
        rows={3}
        maxLength={8000}
        value={allow}
        onInput={setAllow}
        hint={`Addresses or CIDR blocks, one a line (at most ${MAX_ALLOW}). Empty: the key works from any address.`}
      />
    </FormCard>
  );
}
