// Suppressions (#/suppressions): addresses mail is not sent to. List with filters, add, delete
// one, delete all (typed out: it cannot be undone).
import { useId, useState } from 'preact/hooks';
import { v2, type SessionInfo } from '../../api.ts';
import { Badge, Page, Show, useLoad, When } from '../../ui.tsx';
import { ConfirmDialog } from '../kit/confirm.tsx';
import { TextField } from '../kit/fields.tsx';
import { FormCard, Notice } from '../kit/form.tsx';
import { ListTable, RowButton } from '../kit/list-table.tsx';
import { useCursor, type ListPage } from '../kit/paging.tsx';
import { localToIso, seg } from '../kit/text.ts';

interface Suppression {
  id: string;
  email: string;
  domain: string;
  reason: string;
  created_at: string;
  expires_at: string;
  /** A complaint's: kept by "delete all". */
  protected: boolean;
}

interface Filter {
  email: string;
  domain: string;
  from: string;
  to: string;
}

const EMPTY: Filter = { email: '', domain: '', from: '', to: '' };
const WIPE_WORDS = 'delete all';

export function SuppressionsScreen(props: { session: SessionInfo }) {
  const path = `/accounts/${seg(props.session.account_id ?? '')}/suppressions`;
  const id = useId();
  const [draft, setDraft] = useState<Filter>(EMPTY);
  const [filter, setFilter] = useState<Filter>(EMPTY);
  const { cursor, setCursor, reset } = useCursor();
  const list = useLoad(
    () =>
      v2.get<ListPage<Suppression>>(path, {
        email: filter.email.trim() || undefined,
        domain: filter.domain.trim() || undefined,
        from_time: localToIso(filter.from),
        to_time: localToIso(filter.to),
        ...cursor,
      }),
    [path, filter, cursor],
  );
  const [adding, setAdding] = useState(false);
  const [deleting, setDeleting] = useState<Suppression | null>(null);
  const [wiping, setWiping] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);

  const field = (name: keyof Filter, label: string, type = 'text', max = 254) => (
    <div>
      <label for={`${id}-${name}`}>{label}</label>
      <input
        id={`${id}-${name}`}
        type={type}
        maxLength={max}
        value={draft[name]}
        onInput={(e) => setDraft({ ...draft, [name]: (e.target as HTMLInputElement).value })}
      />
    </div>
  );

  return (
    <Page
      title="Suppressions"
      actions={
        <>
          <button type="button" onClick={() => (setAdding(true), setNotice(null))}>
            Add suppression
          </button>
          <button type="button" class="danger" onClick={() => setWiping(true)}>
            Delete all
          </button>
        </>
      }
    >
      <p class="muted">Mail to a suppressed address is not sent until the suppression expires or is deleted.</p>
      <Notice text={notice} />
      {adding ? (
        <AddForm
          onCancel={() => setAdding(false)}
          onAdd={async (body) => {
            const created = await v2.post<ListPage<Suppression>>(path, body);
            setAdding(false);
            setNotice(`Suppressed ${body.email} (${created.data.length} record${created.data.length === 1 ? '' : 's'}).`);
            list.reload();
          }}
        />
      ) : null}
      <form
        class="filters"
        role="search"
        aria-label="Filter suppressions"
        onSubmit={(e) => {
          e.preventDefault();
          reset();
          setFilter(draft);
        }}
      >
        {field('email', 'Email', 'email')}
        {field('domain', 'Domain', 'text', 253)}
        {field('from', 'Created from', 'datetime-local', 40)}
        {field('to', 'Created to', 'datetime-local', 40)}
        <div class="actions">
          <button type="submit">Filter</button>
          <button
            type="button"
            class="secondary"
            onClick={() => {
              setDraft(EMPTY);
              reset();
              setFilter(EMPTY);
            }}
          >
            Clear
          </button>
        </div>
      </form>
      <Show loaded={list}>
        {(page) => (
          <ListTable
            caption="Suppressions"
            columns={['Email', 'Domain', 'Reason', 'Created', 'Expires', 'Actions']}
            page={page}
            empty={`No suppressions${filter === EMPTY ? '' : ' match these filters'}.`}
            cursor={cursor}
            onPage={setCursor}
            row={(s) => (
              <tr key={s.id}>
                <th scope="row" id={`sup-${s.id}`}>
                  {s.email} {s.protected ? <Badge value="complaint" tone="bad" /> : null}
                </th>
                <td>{s.domain}</td>
                <td>{s.reason || <span class="muted">—</span>}</td>
                <td>
                  <When at={s.created_at} />
                </td>
                <td>
                  <When at={s.expires_at} />
                </td>
                <td class="actions-cell">
                  <RowButton of={`sup-${s.id}`} look="danger" onClick={() => setDeleting(s)}>
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
          title={`Delete the suppression of ${deleting.email}?`}
          confirmLabel="Delete suppression"
          danger
          onConfirm={async () => {
            const done = await v2.delete<{ message: string }>(path, undefined, { email: deleting.email, domain: deleting.domain });
            setNotice(done?.message ?? `Deleted the suppression of ${deleting.email}.`);
            list.reload();
          }}
          onClose={() => setDeleting(null)}
        >
          <p>
            Mail from {deleting.domain} to this address will be sent again.
            {deleting.protected ? ' The address complained about mail before: be sure it wants mail again.' : ''}
          </p>
        </ConfirmDialog>
      ) : null}
      {wiping ? (
        <ConfirmDialog
          title="Delete every suppression?"
          confirmLabel="Delete all suppressions"
          danger
          typed={WIPE_WORDS}
          onConfirm={async () => {
            const done = await v2.delete<{ message: string }>(`${path}/all`);
            setNotice(done?.message ?? 'Deleted the suppressions.');
            reset();
            list.reload();
          }}
          onClose={() => setWiping(false)}
        >
          <p>
            Every suppression of the account is deleted, for every domain, and mail goes to those addresses again. Suppressions made by complaints are kept.
            This cannot be undone.
          </p>
        </ConfirmDialog>
      ) : null}
    </Page>
  );
}

interface SuppressionBody {
  email: string;
  domain?: string;
  reason?: string;
  expires_at: string;
}

function AddForm(props: { onAdd: (body: SuppressionBody) => Promise<void>; onCancel: () => void }) {
  const [email, setEmail] = useState('');
  const [domain, setDomain] = useState('');
  const [reason, setReason] = useState('');
  const [expires, setExpires] = useState('');
  const submit = async () => {
    const expiresAt = localToIso(expires);
    if (!expiresAt) return 'Give the time the suppression expires.';
    const body: SuppressionBody = { email: email.trim(), expires_at: expiresAt };
    if (domain.trim()) body.domain = domain.trim();
    if (reason.trim()) body.reason = reason.trim();
    await props.onAdd(body);
  };
  return (
    <FormCard card title="Add a suppression" submitLabel="Add suppression" onSubmit={submit} onCancel={props.onCancel}>
      <TextField label="Email address" type="email" required maxLength={254} value={email} onInput={setEmail} />
      <TextField label="Sending domain" maxLength={253} value={domain} onInput={setDomain} hint="Empty: for every domain of the account." />
      <TextField label="Reason" maxLength={255} value={reason} onInput={setReason} />
      <TextField label="Expires" type="datetime-local" required value={expires} onInput={setExpires} />
    </FormCard>
  );
}
