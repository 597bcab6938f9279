// SMTP credentials (#/smtp-credentials): list, create (the password shown once), delete.
import { useId, useState } from 'preact/hooks';
import { v2, type SessionInfo } from '../../api.ts';
import { Badge, ErrorBox, messageOf, Page, Show, useLoad, When } from '../../ui.tsx';
import { ConfirmDialog } from '../kit/confirm.tsx';
import { Pager, useCursor, type ListPage } from '../kit/paging.tsx';
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
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
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
        {(page) =>
          page.data.length === 0 ? (
            <p class="muted">No SMTP credentials yet.</p>
          ) : (
            <>
              <div class="table-wrap">
                <table>
                  <caption>SMTP credentials</caption>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">User name</th>
                      <th scope="col">Domains</th>
                      <th scope="col">Sandbox</th>
                      <th scope="col">Created</th>
                      <th scope="col">Actions</th>
                    </tr>
                  </thead>
                  <tbody>
                    {page.data.map((c) => (
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
                          <button type="button" class="danger small" aria-describedby={`cred-${c.id}`} onClick={() => setDeleting(c)}>
                            Delete
                          </button>
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              <Pager pagination={page.pagination} cursor={cursor} onPage={setCursor} />
            </>
          )
        }
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

function CredentialForm(props: { onCreate: (body: CredentialBody) => Promise<void>; onCancel: () => void }) {
  const id = useId();
  const [name, setName] = useState('');
  const [scope, setScope] = useState<'global' | 'scoped'>('scoped');
  const [domains, setDomains] = useState('');
  const [sandbox, setSandbox] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const body: CredentialBody = { name: name.trim(), scope, sandbox, domains: scope === 'scoped' ? items(domains) : [] };
    if (scope === 'scoped' && body.domains.length === 0) return setError('Name at least one domain, or choose every domain.');
    setBusy(true);
    setError(null);
    try {
      await props.onCreate(body);
    } catch (err) {
      setError(messageOf(err));
      setBusy(false);
    }
  };
  return (
    <form class="stack card" onSubmit={(e) => void submit(e)} aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>New SMTP credential</h2>
      <div>
        <label for={`${id}-name`}>Name</label>
        <input id={`${id}-name`} required maxLength={255} value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      </div>
      <fieldset>
        <legend>Which domains it may send from</legend>
        <label class="check">
          <input type="radio" name={`${id}-scope`} checked={scope === 'scoped'} onChange={() => setScope('scoped')} />
          Only those listed below
        </label>
        <label class="check">
          <input type="radio" name={`${id}-scope`} checked={scope === 'global'} onChange={() => setScope('global')} />
          Any domain of the account
        </label>
      </fieldset>
      {scope === 'scoped' ? (
        <div>
          <label for={`${id}-domains`}>Domains</label>
          <textarea
            id={`${id}-domains`}
            rows={2}
            maxLength={8000}
            spellcheck={false}
            aria-describedby={`${id}-domains-hint`}
            value={domains}
            onInput={(e) => setDomains((e.target as HTMLTextAreaElement).value)}
          />
          <p class="hint" id={`${id}-domains-hint`}>
            One a line, or separated by commas.
          </p>
        </div>
      ) : null}
      <label class="check">
        <input type="checkbox" checked={sandbox} onChange={(e) => setSandbox((e.target as HTMLInputElement).checked)} />
        Sandbox: its mail goes to the sandbox, not to recipients
      </label>
      <ErrorBox error={error} />
      <div class="actions">
        <button type="submit" disabled={busy}>
          Create SMTP credential
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
