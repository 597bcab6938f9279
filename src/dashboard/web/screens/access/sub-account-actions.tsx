// Suspending, unsuspending and deleting a sub-account: the same questions from the list and
// from its page.
import { v2 } from '../../api.ts';
import { ConfirmDialog } from '../kit/confirm.tsx';
import { seg } from '../kit/text.ts';

export interface SubAccount {
  id: string;
  name: string;
  website: string;
  /** active, suspended, parent-suspended or deleted. */
  status: string;
  monthly_credit: number;
  domain_count: number;
  member_count: number;
  last_activity_at: string | null;
  created_at: string;
}

export type SubAccountAction = { kind: 'suspend' | 'unsuspend' | 'delete'; sub: SubAccount };

/** The reason the API takes is 1..500 characters (MAX_REASON). */
const MAX_REASON = 500;

export const subAccountsPath = (accountId: string) => `/accounts/${seg(accountId)}/sub-accounts`;

export function SubAccountDialog(props: { accountId: string; action: SubAccountAction; onDone: (message: string) => void; onClose: () => void }) {
  const { kind, sub } = props.action;
  const path = `${subAccountsPath(props.accountId)}/${seg(sub.id)}`;
  switch (kind) {
    case 'suspend':
      return (
        <ConfirmDialog
          title={`Suspend the sub-account “${sub.name}”?`}
          confirmLabel="Suspend sub-account"
          danger
          reason={{ label: 'Reason', max: MAX_REASON }}
          onConfirm={async (reason) => {
            await v2.post(`${path}/suspend`, { reason });
            props.onDone(`Suspended “${sub.name}”.`);
          }}
          onClose={props.onClose}
        >
          <p>Its keys are refused and its mail is held until it is unsuspended.</p>
        </ConfirmDialog>
      );
    case 'unsuspend':
      return (
        <ConfirmDialog
          title={`Unsuspend the sub-account “${sub.name}”?`}
          confirmLabel="Unsuspend sub-account"
          onConfirm={async () => {
            await v2.post(`${path}/unsuspend`);
            props.onDone(`Unsuspended “${sub.name}”.`);
          }}
          onClose={props.onClose}
        >
          <p>Its keys work again and its held mail goes out.</p>
        </ConfirmDialog>
      );
    case 'delete':
      return (
        <ConfirmDialog
          title={`Delete the sub-account “${sub.name}”?`}
          confirmLabel="Delete sub-account"
          danger
          typed={sub.name}
          onConfirm={async () => {
            await v2.delete(path);
            props.onDone(`Deleted “${sub.name}”.`);
          }}
          onClose={props.onClose}
        >
          <p>Its keys, domains and sending stop for good. Its usage this period stays billed to this account.</p>
        </ConfirmDialog>
      );
  }
}

/** The buttons that open those questions, for one sub-account. */
export function SubAccountButtons(props: { sub: SubAccount; describedBy?: string; small?: boolean; onAction: (a: SubAccountAction) => void }) {
  const { sub } = props;
  const size = props.small ? ' small' : '';
  if (sub.status === 'deleted') return null;
  return (
    <>
      {sub.status === 'active' ? (
        <button type="button" class={`secondary${size}`} aria-describedby={props.describedBy} onClick={() => props.onAction({ kind: 'suspend', sub })}>
          Suspend
        </button>
      ) : sub.status === 'suspended' ? (
        <button type="button" class={`secondary${size}`} aria-describedby={props.describedBy} onClick={() => props.onAction({ kind: 'unsuspend', sub })}>
          Unsuspend
        </button>
      ) : null}
      <button type="button" class={`danger${size}`} aria-describedby={props.describedBy} onClick={() => props.onAction({ kind: 'delete', sub })}>
        Delete
      </button>
    </>
  );
}
