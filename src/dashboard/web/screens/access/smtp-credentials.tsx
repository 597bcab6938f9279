// SMTP credentials (#/smtp-credentials): list, create (the password shown once), delete.
import { useState } from 'preact/hooks';
import { v2, type SessionInfo } from '../../api.ts';
import { Badge, Page, Show, useLoad, When } from '../../ui.tsx';
import { ConfirmDialog } from '../kit/confirm.tsx';
import { CheckField, RadioField, TextField } from '../kit/fields.tsx';
import { FormCard, Notice } from '../kit/form.tsx';
import { ListTable, RowButton } from '../kit/list-table.tsx';
import { useCursor, type ListPage } from '../kit/paging.tsx';
import { ShownOnce } from '../kit/shown-once.tsx';
import { items, seg } from '../kit/text.ts';

interface Credential {
  id: string;
  name: string;
  username: string;
  sandbox: boolean;
  scope: 'global' | 'scoped';
  domains: string[];
  created_at: string;
}

export function SmtpCredentialsScreen(props: { session: SessionInfo }) {
  const path = `/accounts/${seg(props.session.account_id ?? '')}/smtp-credentials`;
  const { cursor, setCursor } = useCursor();
  const list = useLoad(() => v2.get<ListPage<Credential>>(path, { ...cursor }), [path, cursor]);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<(Credential & { password: string }) | null>(null);
  const [deleting, setDeleting] = useState<Credential | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  return (
    <Page title="SMTP credentials">
      <p class="muted">For applications that send over SMTP submission instead of the API.</p>
      {created ? (
        <ShownOnce heading="Password" what="password" value={created.password} onDone={() => setCreated(null)}>
          <p>
            User name: <code>{created.username}</code>
          </p>
        </ShownOnce>
      ) : null}
      <Notice text={notice} />
      {creating ? (
        <CredentialForm
          onCancel={() => setCreating(false)}
          onCreate={async (body) => {
            setCreated(await v2.post<Credential & { password: string }>(path, body));
            setCreating(false);
            setNotice(null);
            list.reload();
          }}
        />
      ) : (
        <div class="actions">
          <button type="button" onClick={() => (setCreating(true), setNotice(null))}>
            New SMTP credential
          </button>
        </div>
      )}
      <Show loaded={list}>
        {(page) => (
          <ListTable
            caption="SMTP credentials"
            columns={['Name', 'User name', 'Domains', 'Sandbox', 'Created', 'Actions']}
            page={page}
            empty="No SMTP credentials yet."
            cursor={cursor}
            onPage={setCursor}
            row={(c) => (
              <tr key={c.id}>
                <th scope="row" id={`cred-${c.id}`}>
                  {c.name}
                </th>
                <td>
                  <code>{c.username}</code>
                </td>
                <td>{c.scope === 'global' ? <span class="muted">every domain</span> : c.domains.join(', ')}</td>
                <td>{c.sandbox ? <Badge value="sandbox" tone="warn" /> : 'no'}</td>
                <td>
                  <When at={c.created_at} />
                </td>
                <td class="actions-cell">
                  <RowButton of={`cred-${c.id}`} look="danger" onClick={() => setDeleting(c)}>
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
          title={`Delete the SMTP credential “${deleting.name}”?`}
          confirmLabel="Delete credential"
          danger
          onConfirm={async () => {
            await v2.delete(`${path}/${seg(deleting.id)}`);
            setNotice(`Deleted the SMTP credential “${deleting.name}”.`);
            list.reload();
          }}
          onClose={() => setDeleting(null)}
        >
          <p>Applications signing in with it are refused from now on.</p>
        </ConfirmDialog>
      ) : null}
    </Page>
  );
}

interface CredentialBody {
  name: string;
  scope: 'global' | 'scoped';
  sandbox: boolean;
  domains: string[];
}

const SCOPES = [
  ['scoped', 'Only those listed below'],
  ['global', 'Any domain of the account'],
] as const;

function CredentialForm(props: { onCreate: (body: CredentialBody) => Promise<void>; onCancel: () => void }) {
  const [name, setName] = useState('');
  const [scope, setScope] = useState<'global' | 'scoped'>('scoped');
  const [domains, setDomains] = useState('');
  const [sandbox, setSandbox] = useState(false);
  const submit = async () => {
    const body: CredentialBody = { name: name.trim(), scope, sandbox, domains: scope === 'scoped' ? items(domains) : [] };
    if (scope === 'scoped' && body.domains.length === 0) return 'Name at least one domain, or choose every domain.';
    await props.onCreate(body);
  };
  return (
    <FormCard card title="New SMTP credential" submitLabel="Create SMTP credential" onSubmit={submit} onCancel={props.onCancel}>
      <TextField label="Name" required maxLength={255} value={name} onInput={setName} />
      <RadioField legend="Which domains it may send from" value={scope} options={SCOPES} onChange={setScope} />
      {scope === 'scoped' ? (
        <TextField label="Domains" rows={2} maxLength={8000} value={domains} onInput={setDomains} hint="One a line, or separated by commas." />
      ) : null}
      <CheckField label="Sandbox: its mail goes to the sandbox, not to recipients" checked={sandbox} onChange={setSandbox} />
    </FormCard>
  );
}
