// Sub-accounts (#/sub-accounts): the child accounts and what each sent this billing period
// (getSubAccountsUsage), create, suspend/unsuspend, delete; each one's page has its API keys.
import { useId, useState } from 'preact/hooks';
import { v2, type SessionInfo } from '../../api.ts';
import { Badge, Page, Show, useLoad, When, type Loaded } from '../../ui.tsx';
import { TextField } from '../kit/fields.tsx';
import { FormCard, Notice } from '../kit/form.tsx';
import { ListTable } from '../kit/list-table.tsx';
import { useCursor, type ListPage } from '../kit/paging.tsx';
import { seg } from '../kit/text.ts';
import { SubAccountButtons, SubAccountDialog, subAccountsPath, type SubAccount, type SubAccountAction } from './sub-account-actions.tsx';

interface Bucket {
  account_id?: string;
  name?: string;
  reception_count: number;
  allocated_cost: number;
}

interface Usage {
  billing_period: { start: string; end: string };
  currency: string;
  allocation_note: string;
  parent: Bucket;
  sub_accounts: Bucket[];
  removed_sub_accounts: Bucket;
  total: Bucket;
}

const MAX_CREDIT = 1_000_000_000;

export function SubAccountsScreen(props: { session: SessionInfo }) {
  const accountId = props.session.account_id ?? '';
  const path = subAccountsPath(accountId);
  const { cursor, setCursor } = useCursor();
  const list = useLoad(() => v2.get<ListPage<SubAccount>>(path, { ...cursor }), [path, cursor]);
  const usage = useLoad(() => v2.get<Usage>(`${path}/usage`), [path]);
  const [creating, setCreating] = useState(false);
  const [action, setAction] = useState<SubAccountAction | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const usageOf = new Map((usage.data?.sub_accounts ?? []).map((b) => [b.account_id, b]));
  const money = (amount: number) => formatMoney(amount, usage.data?.currency);

  return (
    <Page
      title="Sub-accounts"
      actions={
        creating ? null : (
          <button type="button" onClick={() => (setCreating(true), setNotice(null))}>
            New sub-account
          </button>
        )
      }
    >
      <Notice text={notice} />
      {creating ? (
        <SubAccountForm
          onCancel={() => setCreating(false)}
          onCreate={async (body) => {
            const sub = await v2.post<SubAccount>(path, body);
            setCreating(false);
            setNotice(`Created “${sub.name}”. Open it to give it an API key.`);
            list.reload();
            usage.reload();
          }}
        />
      ) : null}
      <Show loaded={list}>
        {(page) => (
          <ListTable
            caption="Sub-accounts"
            columns={['Name', 'Status', 'Domains', 'Messages this period', 'Allocated cost', 'Last activity', 'Actions']}
            page={page}
            empty="No sub-accounts yet."
            cursor={cursor}
            onPage={setCursor}
            row={(sub) => {
              const used = usageOf.get(sub.id);
              return (
                <tr key={sub.id}>
                  <th scope="row" id={`sub-${sub.id}`}>
                    <a href={`#/sub-accounts/${seg(sub.id)}`}>{sub.name}</a>
                    <br />
                    <span class="muted">{sub.website}</span>
                  </th>
                  <td>
                    <Badge value={sub.status} />
                  </td>
                  <td>{sub.domain_count}</td>
                  <td>{used ? used.reception_count : <span class="muted">—</span>}</td>
                  <td>{used ? money(used.allocated_cost) : <span class="muted">—</span>}</td>
                  <td>
                    <When at={sub.last_activity_at} />
                  </td>
                  <td class="actions-cell">
                    <SubAccountButtons sub={sub} small describedBy={`sub-${sub.id}`} onAction={setAction} />
                  </td>
                </tr>
              );
            }}
          />
        )}
      </Show>
      <UsageSummary usage={usage} money={money} />
      {action ? (
        <SubAccountDialog
          accountId={accountId}
          action={action}
          onDone={(message) => {
            setNotice(message);
            list.reload();
            usage.reload();
          }}
          onClose={() => setAction(null)}
        />
      ) : null}
    </Page>
  );
}

function UsageSummary(props: { usage: Loaded<Usage>; money: (n: number) => string }) {
  return (
    <section aria-labelledby="usage-title">
      <h2 id="usage-title">Usage this billing period</h2>
      <Show loaded={props.usage}>
        {(u) => (
          <>
            <p>
              <When at={u.billing_period.start} /> to <When at={u.billing_period.end} />
            </p>
            <dl class="fields">
              <dt>This account</dt>
              <dd>
                {messages(u.parent.reception_count)} · {props.money(u.parent.allocated_cost)}
              </dd>
              <dt>Deleted sub-accounts</dt>
              <dd>
                {messages(u.removed_sub_accounts.reception_count)} · {props.money(u.removed_sub_accounts.allocated_cost)}
              </dd>
              <dt>Total</dt>
              <dd>
                {messages(u.total.reception_count)} · {props.money(u.total.allocated_cost)}
              </dd>
            </dl>
            <p class="hint">{u.allocation_note}</p>
          </>
        )}
      </Show>
    </section>
  );
}

const messages = (n: number) => `${n} message${n === 1 ? '' : 's'}`;

export function formatMoney(amount: number, currency: string | undefined): string {
  if (!currency) return String(amount);
  try {
    return new Intl.NumberFormat(undefined, { style: 'currency', currency: currency.toUpperCase() }).format(amount);
  } catch {
    return `${amount} ${currency}`;
  }
}

export interface SubAccountBody {
  name: string;
  website: string;
  monthly_credit?: number;
}

export function SubAccountForm(props: { editing?: SubAccount; onCreate: (body: SubAccountBody) => Promise<void>; onCancel: () => void }) {
  const id = useId();
  const [name, setName] = useState(props.editing?.name ?? '');
  const [website, setWebsite] = useState(props.editing?.website ?? '');
  const [credit, setCredit] = useState(props.editing ? String(props.editing.monthly_credit) : '');
  const submit = async () => {
    const body: SubAccountBody = { name: name.trim(), website: website.trim() };
    if (credit.trim() !== '') {
      const n = Number(credit);
      if (!Number.isInteger(n) || n < 0 || n > MAX_CREDIT) return `The monthly credit is a whole number from 0 to ${MAX_CREDIT}.`;
      body.monthly_credit = n;
    }
    await props.onCreate(body);
  };
  return (
    <FormCard
      card
      title={props.editing ? `Edit “${props.editing.name}”` : 'New sub-account'}
      submitLabel={props.editing ? 'Save changes' : 'Create sub-account'}
      onSubmit={submit}
      onCancel={props.onCancel}
    >
      <TextField label="Name" required maxLength={255} value={name} onInput={setName} />
      <TextField label="Website" required maxLength={255} value={website} onInput={setWebsite} />
      <div>
        <label for={`${id}-credit`}>Monthly credit</label>
        <input
          id={`${id}-credit`}
          type="number"
          min={0}
          max={MAX_CREDIT}
          step={1}
          aria-describedby={`${id}-credit-hint`}
          value={credit}
          onInput={(e) => setCredit((e.target as HTMLInputElement).value)}
        />
        <p class="hint" id={`${id}-credit-hint`}>
          A monthly cap; 0 or empty: no cap.
        </p>
      </div>
    </FormCard>
  );
}
